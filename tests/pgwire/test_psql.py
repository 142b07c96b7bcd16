"""psql (Debian's postgresql-client) runs a script against the PostgreSQL port: DDL, writes,
queries, a transaction, psql's catalog commands (\\dt, \\d, \\d t, \\l, \\du: its real
catalog queries, answered from the real catalog), \\copy in and out, and an error that
ON_ERROR_STOP stops at; its output is compared with `psql/script.out`. `psql/indexes.sql`
describes tables with keys, UNIQUE constraints and indexes (\\d t, \\d+ t, \\di, \\d index,
\\dt+, \\di+); `psql/indexes.out` is what PostgreSQL 15 prints for the same script (STRING
written TEXT) but for the sizes of \\dt+ and \\di+, which are this engine's own.
`psql/views.sql` describes views (\\dv, \\d, \\d v, \\d+ v, \\dv+); `psql/views.out` is what
PostgreSQL 15 prints for it (STRING written TEXT, TIMESTAMP TIMESTAMPTZ) but for the text
after "View definition:", this engine's canonical text of the query where PostgreSQL
writes its own rewriting of it (` SELECT t.id,` and a line a column)."""

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
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False
    )


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


def test_describe_lists_a_tables_indexes_as_postgresql_does(pg, db):
    done = psql(pg, db, "-v", "ON_ERROR_STOP=1", stdin=(HERE / "indexes.sql").read_text())
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (HERE / "indexes.out").read_text()


def test_describe_shows_views_as_postgresql_does(pg, db):
    done = psql(pg, db, "-v", "ON_ERROR_STOP=1", stdin=(HERE / "views.sql").read_text())
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (HERE / "views.out").read_text()


def test_a_reader_sees_the_indexes_of_the_tables_it_may_read(pg, db):
    pg.http.sql("CREATE TABLE open_t (id INT PRIMARY KEY, v INT)", db)
    pg.http.sql("CREATE INDEX open_v ON open_t (v)", db)
    pg.http.sql("CREATE TABLE hidden (id INT PRIMARY KEY, w INT UNIQUE)", db)
    # The name PostgreSQL gives open_t's key, taken by an index the reader may not see: the
    # admin sees the key numbered (open_t_pkey1), the reader sees no trace of the index.
    pg.http.sql("CREATE INDEX open_t_pkey ON hidden (w)", db)
    pg.http.sql("CREATE USER IF NOT EXISTS idx_reader")
    pg.http.sql("GRANT SELECT ON open_t TO idx_reader", db)
    token = pg.http.new_token("idx_reader")
    env = {**os.environ, "PGPASSWORD": token, "PGCONNECT_TIMEOUT": "10"}
    done = subprocess.run(
        [
            "psql",
            "-X",
            "-A",
            "-t",
            "-h",
            pg.host,
            "-p",
            str(pg.port),
            "-U",
            "idx_reader",
            "-d",
            db,
            "-c",
            r"\di",
            "-c",
            r"\d hidden_pkey",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "public|open_t_pkey|index|admin|open_t",
        "public|open_v|index|admin|open_t",
    ]
    assert done.stderr.strip() == 'Did not find any relation named "hidden_pkey".'
    admin = psql(pg, db, "-A", "-t", "-c", r"\di")
    assert [line.split("|")[1:5:3] for line in admin.stdout.splitlines()] == [
        ["hidden_pkey", "hidden"],
        ["hidden_w_key", "hidden"],
        ["open_t_pkey", "hidden"],
        ["open_t_pkey1", "open_t"],
        ["open_v", "open_t"],
    ]


def test_describe_shows_a_catalog_relations_columns(pg, db):
    done = psql(pg, db, "-A", "-c", r"\d pg_am")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == 'Table "pg_catalog.pg_am"'
    assert lines[2:5] == ["oid|oid|||", "amname|text|||", "amtype|text|||"]
