"""pgjdbc's replication API (PGReplicationStream with pgoutput, proto_version and
publication_names: the path Debezium's PostgreSQL connector takes), in a small Java
program compiled and run against a real server."""

from __future__ import annotations

import glob
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import ProgramOutput

SOURCE = Path(__file__).parent / "java" / "PgjdbcStream.java"


def _driver() -> str:
    """Debian's pgjdbc (libpostgresql-jdbc-java, which .ci/run installs), else a Maven copy."""
    debian = Path("/usr/share/java/postgresql.jar")
    maven = sorted(glob.glob(str(Path.home() / ".m2/repository/org/postgresql/postgresql/*/*.jar")))
    found = [str(debian)] if debian.exists() else maven[-1:]
    if not found or shutil.which("javac") is None:
        pytest.skip("pgjdbc (Debian's libpostgresql-jdbc-java) or a JDK is not installed")
    return found[0]


def test_pgjdbc_streams_pgoutput(pg: PgServer, db: str, tmp_path: Path) -> None:
    driver = _driver()
    built = subprocess.run(
        ["javac", "-cp", driver, "-d", str(tmp_path), str(SOURCE)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db=db)
    pg.http.sql("CREATE PUBLICATION jpub FOR TABLE t", db=db)
    url = f"jdbc:postgresql://{pg.host}:{pg.port}/{db}"
    program = subprocess.Popen(
        ["java", "-cp", f"{driver}:{tmp_path}", "PgjdbcStream", url, "admin", pg.token,
         "s_jdbc", "jpub", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    output = ProgramOutput(program)
    output.wait_until(lambda lines: "slot made" in lines, 60)
    pg.http.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')", db=db)
    pg.http.sql("INSERT INTO t VALUES (3, 'c')", db=db)
    output.finish()
    lines = output.lines
    messages = [line.split(" ", 1)[1] for line in lines[1:]]
    assert messages == ["B", "R", "I 1", "I 2", "C", "B", "I 3", "C"]
    # The positions pgjdbc read are ordered, and the slot holds the last one it confirmed.
    positions = [_position(line.split(" ", 1)[0]) for line in lines[1:]]
    assert positions == sorted(positions)
    confirmed = pg.http.rows(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's_jdbc'", db=db
    )[0][0]
    assert _position(confirmed) == positions[-1]


def _position(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)
