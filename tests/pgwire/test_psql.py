"""psql (Debian's postgresql-client) runs a script against the PostgreSQL port: DDL, writes,
queries, a transaction, psql's catalog commands (\\dt, \\d, \\d t, \\l, \\du: its real
catalog queries, answered from the real catalog), \\copy in and out, and an error that
ON_ERROR_STOP stops at; its output is compared with `psql/script.out`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")

HERE = Path(__file__).parent / "psql"


def psql(pg, db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PGPASSWORD": pg.token, "PGCONNECT_TIMEOUT": "10"}
    command = ["psql", "-X", "-h", pg.host, "-p", str(pg.port), "-U", "admin", "-d", db, *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip


def test_a_script_runs_until_its_error(pg):
    # In `demo`, which `\l demo` lists: the script's table is dropped at the end.
    try:
        done = psql(pg, "demo", "-v", "ON_ERROR_STOP=1", stdin=(HERE / "script.sql").read_text())
    finally:
        pg.http.sql("DROP TABLE IF EXISTS t")
    assert done.returncode == 3, done.stderr
    assert done.stdout == (HERE / "script.out").read_text()
    assert done.stderr.strip().splitlines()[0] == "ERROR:  table 'nowhere' does not exist"


def test_a_pattern_of_the_catalog_commands_is_a_linear_time_regex(pg, db):
    pg.http.sql("CREATE TABLE alpha (id INT)", db)
    pg.http.sql("CREATE TABLE beta (id INT)", db)
    done = psql(pg, db, "-A", "-t", "-c", r"\dt a*")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "public|alpha|table|admin\n"
