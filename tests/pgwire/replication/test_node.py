"""node's pg-logical-replication with its pgoutput plugin, unmodified: a slot made over a
replication connection, a subscription with proto_version 1 and a publication, automatic
acknowledgements. Its packages are in node/ (`npm ci --prefix tests/pgwire/replication/node`);
without node or them the test is skipped."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.pgwire.conftest import PgServer

FOLDER = Path(__file__).parent / "node"


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
    lines: list[dict[str, Any]] = []

    def collect() -> None:
        assert program.stdout is not None
        lines.extend(json.loads(line) for line in program.stdout if line.strip())

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while not lines and time.monotonic() < deadline and program.poll() is None:
        time.sleep(0.05)
    assert lines and lines[0] == {"ready": True}, program.stderr.read() if program.stderr else ""
    pg.http.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')", db=db)
    pg.http.sql("UPDATE t SET v = 'c' WHERE id = 1", db=db)
    try:
        program.wait(60)
    finally:
        if program.poll() is None:
            program.kill()
    reader.join(10)
    assert program.returncode == 0, program.stderr.read() if program.stderr else ""
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
