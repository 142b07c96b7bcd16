"""pgjdbc (Debian's libpostgresql-jdbc-java, which .ci/run installs) against a real server:
jdbc/ClientCheck.java runs as a single-file source launch and prints one line a check,
`OK <name>` or `FAIL <name>: <why>`; each check is a test here. The statements pgjdbc sends
(its catalog queries for getTables, getColumns, getPrimaryKeys, getIndexInfo among them)
are kept in captured/pgjdbc.sql."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.pgwire.clients.capture import normalised, record, relay
from tests.pgwire.clients.conftest import verdicts
from tests.pgwire.conftest import PgServer

JAR = Path("/usr/share/java/postgresql.jar")
PROGRAM = Path(__file__).parent / "jdbc" / "ClientCheck.java"
CHECKS = [
    "connect",
    "create",
    "prepared-every-type",  # every engine type as a parameter and a result, NULLs too
    "batch",
    "transaction",
    "savepoint",  # setSavepoint, rollback(savepoint)
    "copy-in-out",  # CopyManager
    "metadata-tables",
    "metadata-columns",  # getColumns: row_number() OVER (PARTITION BY ... ORDER BY ...)
    "metadata-primary-keys",  # getPrimaryKeys: (information_schema._pg_expandarray(...)).n
    "metadata-index-info",  # getIndexInfo: trim(both '"' from ...), indoption[n - 1] & 1
    "error-sqlstate",
]


@pytest.fixture(scope="module")
def results(pg: PgServer) -> dict[str, str]:
    if shutil.which("java") is None or not JAR.exists():
        pytest.skip(f"needs java and {JAR} (Debian's libpostgresql-jdbc-java; .ci/run installs it)")
    db = "jdbc_" + uuid.uuid4().hex[:10]
    pg.http.sql(f"CREATE DATABASE {db}")
    with relay(pg.host, pg.port) as captured:
        done = subprocess.run(
            ["java", "-cp", str(JAR), str(PROGRAM), pg.host, str(captured.port), db, "admin"]
            + [pg.token],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    found = verdicts(done, "ClientCheck")
    record("pgjdbc", normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}))
    return found


@pytest.mark.parametrize("check", CHECKS)
def test_pgjdbc(results: dict[str, str], check: str) -> None:
    assert results.get(check) == "OK", results.get(check, "the check did not run")
