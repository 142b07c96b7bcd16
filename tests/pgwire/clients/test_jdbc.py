"""pgjdbc (Debian's libpostgresql-jdbc-java, which .ci/run installs) against a real server:
jdbc/ClientCheck.java runs as a single-file source launch and prints one line a check,
`OK <name>` or `FAIL <name>: <why>`; each check is a test here."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

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
    "error-sqlstate",
]
# Checks that need what another part of the work adds (catalog queries): expected to
# fail until it lands, and to pass from then on.
AWAITING = {
    "metadata-columns": "getColumns' catalog query (a window function over pg_attribute)",
    "metadata-primary-keys": "getPrimaryKeys reads information_schema",
}


@pytest.fixture(scope="module")
def results(pg: PgServer) -> dict[str, str]:
    if shutil.which("java") is None or not JAR.exists():
        pytest.skip(f"needs java and {JAR} (Debian's libpostgresql-jdbc-java; .ci/run installs it)")
    db = "jdbc_" + uuid.uuid4().hex[:10]
    pg.http.sql(f"CREATE DATABASE {db}")
    done = subprocess.run(
        ["java", "-cp", str(JAR), str(PROGRAM), pg.host, str(pg.port), db, "admin", pg.token],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        found[name] = "OK" if verdict == "OK" else why
    assert "connect" in found, f"ClientCheck did not connect: {done.stdout}{done.stderr}"
    return found


@pytest.mark.parametrize("check", CHECKS)
def test_pgjdbc(results: dict[str, str], check: str) -> None:
    assert results.get(check) == "OK", results.get(check, "the check did not run")


@pytest.mark.parametrize(
    "check",
    [pytest.param(name, marks=pytest.mark.xfail(reason=why)) for name, why in AWAITING.items()],
)
def test_pgjdbc_awaiting(results: dict[str, str], check: str) -> None:
    assert results.get(check) == "OK", results.get(check, "the check did not run")
