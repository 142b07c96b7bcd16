"""node's pg-logical-replication with its pgoutput plugin, unmodified: a slot made over a
replication connection, a subscription with proto_version 1 and a publication, automatic
acknowledgements. Its packages are in node/ (`npm ci --prefix tests/pgwire/replication/node`);
without node or them the test is skipped."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import ProgramOutput

FOLDER = Path(__file__).parent / "node"


def _records(lines: list[str]) -> list[dict[str, Any]]:
    """The program's JSON lines, parsed."""
    return [json.loads(line) for line in lines if line.strip()]


def test_pg_logical_replication_streams_pgoutput(pg: PgServer, db: str) -> None:
    if (
        shutil.which("node") is None
        or not (FOLDER / "node_modules" / "pg-logical-replication").is_dir()
    ):
        pytest.skip(
            "node or its packages (npm ci --prefix tests/pgwire/replication/node) are missing"
        )
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db=db)
    pg.http.sql("CREATE PUBLICATION npub FOR TABLE t", db=db)
    program = subprocess.Popen(
        ["node", str(FOLDER / "stream.js"), pg.host, str(pg.port), "admin", pg.token, db,
         "s_node", "npub", "7"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=FOLDER,
    )  # fmt: skip
    output = ProgramOutput(program)
    output.wait_until(lambda lines: _records(lines)[:1] == [{"ready": True}], 30)
    pg.http.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')", db=db)
    pg.http.sql("UPDATE t SET v = 'c' WHERE id = 1", db=db)
    output.finish()
    lines = _records(output.lines)
    # Messages that arrive while the program stops after the 7th are printed too.
    messages = [(m["tag"], m["row"]) for m in lines[1:8]]
    assert messages == [
        ("begin", None),
        ("relation", None),
        ("insert", {"id": 1, "v": "a"}),
        ("insert", {"id": 2, "v": "b"}),
        ("commit", None),
        ("begin", None),
        ("insert", {"id": 1, "v": "c"}),  # an upsert without before-images is an insert
    ]
