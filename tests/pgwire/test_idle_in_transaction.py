"""A session idle inside a transaction longer than its idle_in_transaction_session_timeout
is ended as PostgreSQL ends it (spec/pgwire.md, "Transactions"): FATAL 25P03, the
connection closed, its transaction rolled back, and the write lock it held released, so
the writers it held off go on. Seen by psycopg, on a server whose
`idle_in_transaction_session_timeout_ms` is 200.

Liveness bounds only: a writer held off by an idle session gets through within the
statement timeout (20 s here); none of these checks how soon."""

from __future__ import annotations

import select
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.http.conftest import running_server
from tests.pgwire.attack import (
    MessageReader,
    error_fields,
    logged_in,
    query_message,
    read_until_closed,
)
from tests.pgwire.conftest import PgServer, pg_address
from tests.waits import eventually

IDLE_MS = 200


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    data: Path = tmp_path_factory.mktemp("idle") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(
        f"idle_in_transaction_session_timeout_ms = {IDLE_MS}\nstatement_timeout_ms = 20000\n"
    )
    with running_server(data, "--pg-port", "0") as running:
        yield PgServer(running, *pg_address(running))


@pytest.fixture
def db(pg: PgServer) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", name)
    return name


def ids(pg: PgServer, db: str) -> list[int]:
    return [row[0] for row in pg.http.rows("SELECT id FROM t ORDER BY id", db)]


def ended(conn: psycopg.Connection) -> psycopg.Error:
    """The error the ended session's next statement meets: the FATAL the server sent."""
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT 1")
    return raised.value


def test_an_idle_writer_is_ended_and_the_writer_it_held_off_goes_on(pg: PgServer, db: str) -> None:
    idle = pg.connect(db)
    idle.execute("BEGIN; INSERT INTO t VALUES (1)")  # the write lock is held from BEGIN
    # Waits for the lock until the idle session is ended, then commits.
    answer = pg.http.exec("INSERT INTO t VALUES (2)", db)
    assert answer.status_code == 200, answer.text
    error = ended(idle)
    assert isinstance(error, psycopg.errors.IdleInTransactionSessionTimeout), error
    assert error.sqlstate == "25P03"
    assert error.diag.severity == "FATAL"
    assert str(error).startswith("terminating connection due to idle-in-transaction timeout")
    assert "idle_in_transaction_session_timeout" in str(error)
    assert idle.closed
    assert ids(pg, db) == [2]  # the idle one's row was rolled back


def test_a_postgres_writer_held_off_goes_on_too(pg: PgServer, db: str) -> None:
    with pg.connect(db) as idle, pg.connect(db) as other:
        idle.execute("BEGIN; INSERT INTO t VALUES (1)")
        other.execute("INSERT INTO t VALUES (3)")
        assert isinstance(ended(idle), psycopg.errors.IdleInTransactionSessionTimeout)
    assert ids(pg, db) == [3]


def test_a_read_only_transaction_holds_the_lock_and_is_ended_alike(pg: PgServer, db: str) -> None:
    with pg.connect(db) as reader, pg.connect(db) as writer:
        reader.execute("SET idle_in_transaction_session_timeout = '1min'")
        # Every transaction takes the write lock at BEGIN, a reading one too: a writer
        # with a short lock timeout is refused while it is open.
        reader.execute("BEGIN; SELECT count(*) FROM t")
        writer.execute("SET lock_timeout = 50")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            writer.execute("INSERT INTO t VALUES (4)")
        reader.execute(f"SET idle_in_transaction_session_timeout = {IDLE_MS}")
        writer.execute("SET lock_timeout = 0")
        writer.execute("INSERT INTO t VALUES (4)")  # waits until the reader is ended
        assert isinstance(ended(reader), psycopg.errors.IdleInTransactionSessionTimeout)
    assert ids(pg, db) == [4]


def test_a_failed_transaction_is_ended_alike(pg: PgServer, db: str) -> None:
    with pg.connect(db) as failed:
        with pytest.raises(psycopg.errors.UndefinedColumn):
            failed.execute("BEGIN; INSERT INTO t VALUES (1); SELECT nope FROM t")
        assert failed.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        assert pg.http.exec("INSERT INTO t VALUES (5)", db).status_code == 200
        assert isinstance(ended(failed), psycopg.errors.IdleInTransactionSessionTimeout)
    assert ids(pg, db) == [5]


def test_a_session_outside_a_transaction_is_never_ended(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        time.sleep(5 * IDLE_MS / 1000)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_its_set_raises_or_turns_off_the_timeout_for_the_session(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("200ms",)
        conn.execute("SET idle_in_transaction_session_timeout = '1min'")
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1min",)
        conn.execute("BEGIN; INSERT INTO t VALUES (1)")
        time.sleep(5 * IDLE_MS / 1000)
        conn.execute("COMMIT")  # not ended: its own timeout is a minute
        conn.execute("SET idle_in_transaction_session_timeout = 0")
        conn.execute("BEGIN")
        time.sleep(5 * IDLE_MS / 1000)
        conn.execute("ROLLBACK")
        conn.execute("RESET idle_in_transaction_session_timeout")  # the server's again
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("200ms",)
    assert ids(pg, db) == [1]


def test_a_lowered_timeout_ends_a_session_of_a_server_that_waits_longer(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("idle_in_transaction_session_timeout_ms = 0\n")
    with running_server(data, "--pg-port", "0") as running:
        pg = PgServer(running, *pg_address(running))
        with pg.connect("demo") as conn:
            assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("0",)
            conn.execute("SET idle_in_transaction_session_timeout = '200ms'")
            conn.execute("BEGIN")
            # The server's FATAL makes the socket readable; asking would reset the timer.
            assert eventually(lambda: select.select([conn.fileno()], [], [], 0)[0], 20)
            assert isinstance(ended(conn), psycopg.errors.IdleInTransactionSessionTimeout)


def test_an_extended_query_waiting_for_its_sync_is_not_idle(pg: PgServer, db: str) -> None:
    # As in PostgreSQL, a session is idle once a ReadyForQuery went out: between an
    # Execute and its Sync (a client's pipeline, a Flush) it is not.
    sock = logged_in(pg, "admin", pg.token, db)
    reader = MessageReader(sock)
    sock.sendall(query_message("BEGIN"))
    assert reader.until(b"Z", 1) == [b"T"]
    insert = b"INSERT INTO t VALUES (1)\0"
    sock.sendall(
        _frame(b"P", b"\0" + insert + b"\0\0")
        + _frame(b"B", b"\0\0" + b"\0\0" * 3)
        + _frame(b"E", b"\0" + b"\0\0\0\0")
        + _frame(b"H", b"")
    )
    reader.until(b"C", 1)
    time.sleep(5 * IDLE_MS / 1000)
    assert not select.select([sock], [], [], 0)[0]  # nothing came: not ended
    sock.sendall(_frame(b"S", b""))
    assert reader.until(b"Z", 1) == [b"T"]  # idle from here
    fields = error_fields(read_until_closed(sock, timeout=20))
    assert (fields["S"], fields["C"]) == ("FATAL", "25P03")
    sock.close()
    assert ids(pg, db) == []


def _frame(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body
