"""A writer waiting for its database's write lock, which another transaction holds, longer
than its lock_timeout gets PostgreSQL's 55P03 "canceling statement due to lock timeout"
(spec/sql.md, "Transactions"); over `/exec`, a 409 whose message says so, and what to do,
without naming the holder. Without a lock_timeout, or with one longer than the statement
timeout, the statement timeout ends the wait as before (57014, a 400)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.http.conftest import running_server
from tests.pgwire.conftest import PgServer, pg_address


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    """A server whose statement timeout is 1 s and whose lock_timeout_ms is 200."""
    data: Path = tmp_path_factory.mktemp("locks") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("statement_timeout_ms = 1000\nlock_timeout_ms = 200\n")
    with running_server(data, "--pg-port", "0") as running:
        yield PgServer(running, *pg_address(running))


@pytest.fixture
def db(pg: PgServer) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", name)
    return name


@pytest.fixture
def holder(pg: PgServer, db: str) -> Iterator[psycopg.Connection]:
    """A session whose open transaction holds the database's write lock."""
    with pg.connect(db) as conn:
        conn.execute("BEGIN; INSERT INTO t VALUES (1)")
        yield conn


def test_a_writer_past_its_lock_timeout_gets_55p03(
    pg: PgServer, db: str, holder: psycopg.Connection
) -> None:
    with pg.connect(db) as writer:
        assert writer.execute("SHOW lock_timeout").fetchone() == ("200ms",)  # the server's
        with pytest.raises(psycopg.errors.LockNotAvailable) as raised:
            writer.execute("INSERT INTO t VALUES (2)")
        message = str(raised.value)
        assert message.startswith("canceling statement due to lock timeout")
        assert "lock_timeout" in message and "try again" in message
        assert writer.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        holder.execute("COMMIT")
        writer.execute("INSERT INTO t VALUES (2)")  # the lock is free: it commits
    assert pg.http.rows("SELECT id FROM t ORDER BY id", db) == [[1], [2]]


def test_a_begin_waits_as_a_write_does(pg: PgServer, db: str, holder: psycopg.Connection) -> None:
    with pg.connect(db) as writer:
        writer.execute("SET lock_timeout = '100ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            writer.execute("BEGIN")


def test_exec_answers_a_409_that_names_no_holder(
    pg: PgServer, db: str, holder: psycopg.Connection
) -> None:
    answer = pg.http.exec("INSERT INTO t VALUES (2)", db)
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error.startswith("canceling statement due to lock timeout"), error
    assert "admin" not in error and "process" not in error  # who holds it is not said
    assert "try again" in error


def test_no_lock_timeout_or_a_longer_one_leaves_the_wait_to_the_statement_timeout(
    pg: PgServer, db: str, holder: psycopg.Connection
) -> None:
    with pg.connect(db) as writer:
        for value in ("0", "'5s'"):
            writer.execute(f"SET lock_timeout = {value}")
            with pytest.raises(psycopg.errors.QueryCanceled) as raised:
                writer.execute("INSERT INTO t VALUES (2)")
            assert "waited 1 s for database" in str(raised.value)


def test_a_value_that_is_no_time_is_refused(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        for value in ("-1", "'soon'", "'3 weeks'"):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute(f"SET lock_timeout = {value}")
        conn.execute("SET lock_timeout = '1.5s'")
        assert conn.execute("SHOW lock_timeout").fetchone() == ("1500ms",)
        conn.execute("SET lock_timeout TO DEFAULT")
        assert conn.execute("SHOW lock_timeout").fetchone() == ("200ms",)
