"""The statements of one simple Query are one transaction, as PostgreSQL runs them (its
"implicit transaction block"; spec/pgwire.md, "Queries"), seen by real clients: psycopg,
psql -c, the change stream over HTTP; `/exec`'s several statements still commit one by
one (spec/http-exec.md, "Several statements")."""

from __future__ import annotations

import os
import shutil
import subprocess

import psycopg
import pytest

from tests.pgwire.conftest import PgServer


def ids(pg: PgServer, db: str) -> list[int]:
    return [row[0] for row in pg.http.rows("SELECT id FROM t ORDER BY id", db)]


def changes(pg: PgServer, db: str) -> list[dict]:
    """The row changes of `t` in the change stream (`/api/changes`)."""
    answer = pg.http.get("/api/changes", params={"db": db, "table": "t", "format": "json"})
    assert answer.status_code == 200, answer.text
    return [c for c in answer.json()["changes"] if c["op"] != "ddl"]


@pytest.fixture
def table(pg: PgServer, db: str) -> str:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    return db


def test_a_text_commits_once_and_the_change_stream_sees_one_transaction(
    pg: PgServer, table: str
) -> None:
    with pg.connect(table) as conn:
        conn.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (3); SELECT 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        (rev,) = conn.execute("SELECT kdb_rev('t')").fetchone()  # type: ignore[misc]
    rows = changes(pg, table)
    assert [c["row"]["id"] for c in rows] == [1, 2, 3]
    assert len({c["lsn"] for c in rows}) == 1, rows  # one transaction
    assert str(rev).endswith(f".{rows[0]['lsn']}"), rev  # the revision of that commit


def test_an_error_rolls_back_the_statements_before_it(pg: PgServer, table: str) -> None:
    notices: list[str] = []
    with pg.connect(table) as conn:
        conn.add_notice_handler(lambda d: notices.append(f"{d.severity} {d.sqlstate}"))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (1)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert ids(pg, table) == []
        assert changes(pg, table) == []
        # A COMMIT among them commits what came before it, with PostgreSQL's warning.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO t VALUES (1); COMMIT; INSERT INTO t VALUES (2), (1)")
        assert notices == ["WARNING 25P01"]
        assert ids(pg, table) == [1]


def test_a_begin_in_the_text_keeps_the_statements_before_it_in_its_block(
    pg: PgServer, table: str
) -> None:
    with pg.connect(table) as conn:
        conn.execute("INSERT INTO t VALUES (1); BEGIN; INSERT INTO t VALUES (2)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert ids(pg, table) == []  # nothing committed yet
        conn.execute("ROLLBACK")
    assert ids(pg, table) == []


def test_exec_still_commits_each_statement_on_its_own(pg: PgServer, table: str) -> None:
    answer = pg.http.exec("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (1)", table)
    assert answer.status_code == 400 and answer.json()["statement"] == 2
    assert ids(pg, table) == [1]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_c_sees_a_text_as_one_transaction(pg: PgServer, table: str) -> None:
    env = {**os.environ, "PGPASSWORD": pg.token, "PGCONNECT_TIMEOUT": "10"}
    base = ["psql", "-X", "-h", pg.host, "-p", str(pg.port), "-U", "admin", "-d", table]

    def psql(sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*base, "-c", sql], capture_output=True, text=True, env=env, timeout=60, check=False
        )

    failed = psql("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); INSERT INTO t VALUES (1)")
    assert failed.returncode == 1
    assert "duplicate primary key 1" in failed.stderr
    assert ids(pg, table) == []
    done = psql("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); SELECT count(*) FROM t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["2", "(1", "row)"]
    assert len({c["lsn"] for c in changes(pg, table)}) == 1


def test_notifications_go_with_the_transaction_of_the_text_they_are_in(
    pg: PgServer, table: str
) -> None:
    with pg.connect(table) as listener, pg.connect(table) as sender:
        listener.execute("LISTEN c")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            sender.execute("NOTIFY c, 'kept'; COMMIT; NOTIFY c, 'undone'; SELECT nope FROM t")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            # A query's notification too: the text's first "change" begins its transaction.
            sender.execute("SELECT pg_notify('c', 'undone too'); SELECT nope FROM t")
        sender.execute("NOTIFY c, 'last'; SELECT 1")
        notes = listener.notifies(timeout=5, stop_after=3)
        assert [n.payload for n in notes] == ["kept", "last"]
