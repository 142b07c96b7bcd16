"""node-postgres (`pg` and `pg-cursor` from npm, which .ci/run installs into node/) against a
real server: node/check.js prints one line a check, `OK <name>` or `FAIL <name>: <why>`;
each check is a test here."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.pgwire.clients.conftest import verdicts
from tests.pgwire.conftest import PgServer

FOLDER = Path(__file__).parent / "node"
CHECKS = [
    "connect",
    "parameters",  # every engine type as a parameter (sent as untyped text) and a result
    "named-statement",
    "cursor-pages",  # pg-cursor: a query read 20 rows at a time inside a transaction
    "listen",  # a channel and a table's change channel
    "error-code",
]


@pytest.fixture(scope="module")
def results(pg: PgServer) -> dict[str, str]:
    if shutil.which("node") is None or not (FOLDER / "node_modules" / "pg-cursor").exists():
        pytest.skip(
            "needs node and pg, pg-cursor in tests/pgwire/clients/node/node_modules"
            " (npm install --no-audit --no-fund there; .ci/run does)"
        )
    db = "node_" + uuid.uuid4().hex[:10]
    pg.http.sql(f"CREATE DATABASE {db}")
    done = subprocess.run(
        ["node", "check.js", pg.host, str(pg.port), db, "admin", pg.token],
        cwd=FOLDER,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return verdicts(done, "check.js")


@pytest.mark.parametrize("check", CHECKS)
def test_node_postgres(results: dict[str, str], check: str) -> None:
    assert results.get(check) == "OK", results.get(check, "the check did not run")
