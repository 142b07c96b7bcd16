"""Acknowledgements of commits: handed back in order once durable, a failed flush handed
back as the error, every one handed back before `close` returns; and over the protocol,
nothing a client was told committed is lost when the server is killed."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import psycopg
import pytest

from refimpl.engine.instance import Instance
from refimpl.errors import KdbError, WritesStopped
from refimpl.pgwire.acknowledging import Acknowledging
from tests.http.conftest import start_server
from tests.pgwire.attack import MessageReader, logged_in, query_message, read_until_closed
from tests.pgwire.conftest import PgServer, pg_address

WAIT = 10.0


def test_answers_are_handed_back_in_order_once_their_wait_returned():
    handed: list[tuple[int, KdbError | None]] = []
    gate = threading.Event()
    acks: Acknowledging[int] = Acknowledging(lambda item, error: handed.append((item, error)))

    def wait_gate() -> None:
        gate.wait(WAIT)

    try:
        acks.hand_over(1, wait_gate)
        for item in range(2, 6):
            acks.hand_over(item, lambda: None)
        time.sleep(0.05)
        assert handed == []  # the first wait holds the round: nothing goes out before it
        gate.set()
    finally:
        acks.close()
    assert handed == [(n, None) for n in range(1, 6)]


def test_a_failed_flush_hands_back_the_error_and_the_thread_goes_on():
    handed: list[tuple[str, KdbError | None]] = []
    acks: Acknowledging[str] = Acknowledging(lambda item, error: handed.append((item, error)))

    def failing() -> None:
        raise WritesStopped("the disk is full")

    def bug(item: str, error: KdbError | None) -> None:
        raise RuntimeError("a bug in sending")

    try:
        acks.hand_over("lost", failing)
        acks.hand_over("kept", lambda: None)
    finally:
        acks.close()
    assert handed[0][0] == "lost" and isinstance(handed[0][1], WritesStopped)
    assert handed[1] == ("kept", None)
    broken: Acknowledging[str] = Acknowledging(bug)
    broken.hand_over("a", lambda: None)
    broken.close()  # a bug in the callback is logged; close still returns


WRITERS = 6


@pytest.mark.parametrize("delay", [0.4, 1.2])
def test_nothing_acknowledged_is_lost_when_the_server_is_killed(tmp_path: Path, delay: float):
    data = tmp_path / "data"
    server = start_server(data, "--pg-port", "0")
    acknowledged: list[list[int]] = [[] for _ in range(WRITERS)]
    try:
        pg = PgServer(server, *pg_address(server))
        with pg.connect() as conn:
            conn.execute("CREATE TABLE w (id INT PRIMARY KEY, writer INT)")

        def write(writer: int) -> None:
            try:
                with pg.connect() as conn:
                    for n in range(100_000):
                        row_id = writer * 1_000_000 + n
                        conn.execute(f"INSERT INTO w VALUES ({row_id}, {writer})")
                        acknowledged[writer].append(row_id)  # CommandComplete came
            except psycopg.Error:
                return  # the kill

        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        time.sleep(delay)
    finally:
        server.stop(signal.SIGKILL)
    for thread in threads:
        thread.join(WAIT)
    told = {row_id for rows in acknowledged for row_id in rows}
    assert told, "no write was acknowledged before the kill"
    instance = Instance.open(data)
    try:
        kept = {row[0] for row in instance.session().execute("SELECT id FROM w").rows}
    finally:
        instance.close()
    assert told <= kept, f"{len(told - kept)} acknowledged rows were lost"


def test_answers_after_a_write_in_one_message_come_in_order(pg: PgServer, db: str):
    # One simple query: a write, a read that sees it, an error, and the transaction status.
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur = conn.cursor()
        cur.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); SELECT count(*) FROM t")
        assert cur.statusmessage == "INSERT 0 1"
        assert cur.nextset() and cur.nextset()
        assert cur.fetchall() == [(2,)]
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO t VALUES (3); INSERT INTO t VALUES (1)")
        assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,), (3,)]
        with conn.pipeline():  # many writes and reads sent before any answer is read
            results = [conn.execute(f"INSERT INTO t VALUES ({n})") for n in range(10, 30)]
            counted = conn.execute("SELECT count(*) FROM t")
        assert [r.rowcount for r in results] == [1] * 20
        assert counted.fetchone() == (23,)


def _reader_of(pg: PgServer, db: str) -> tuple[socket.socket, MessageReader]:
    sock = logged_in(pg, "admin", pg.token, db)
    return sock, MessageReader(sock)


def test_messages_sent_while_a_commit_waits_for_its_flush_are_answered_behind_it(
    pg: PgServer, db: str
):
    # Each INSERT and the count after it in its own send, none of their answers read yet:
    # the connection is read again while the INSERT's answer waits for its flush, and
    # what it answers meanwhile (a read, other writes) must come after it, in order.
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    sock, reader = _reader_of(pg, db)
    try:
        for n in range(1, 101):
            sock.sendall(query_message(f"INSERT INTO t VALUES ({n})"))
            sock.sendall(query_message("SELECT count(*) FROM t"))
            if n % 10 == 0:
                time.sleep(0.002)  # some arrive while others' flushes run
        for n in range(1, 101):
            assert reader.until(b"C", 1) == [b"INSERT 0 1\0"]
            assert reader.next() == (b"Z", b"I")
            assert reader.next()[0] == b"T"
            kind, body = reader.next()
            assert kind == b"D" and body[6:] == str(n).encode()
            assert reader.until(b"Z", 1) == [b"I"]
    finally:
        sock.close()


WIDE = "x" * 14_000


def test_wide_answers_of_pipelined_commits_stay_bounded_and_all_arrive_in_order(
    pg: PgServer, db: str
):
    # 200 INSERTs whose RETURNING answers are 14 KB each (2.8 MB, past the 1 MB bound of a
    # connection's unsent answers), sent at once and read only a moment later: the server
    # stops reading them at the bound and goes on once the client took its answers.
    pg.http.sql("CREATE TABLE w (id INT PRIMARY KEY, v STRING)", db=db)
    sock, reader = _reader_of(pg, db)
    try:
        sock.sendall(
            b"".join(
                query_message(f"INSERT INTO w VALUES ({n}, '{WIDE}') RETURNING id, v")
                for n in range(200)
            )
        )
        time.sleep(1.0)  # the answers wait, past the bound
        for n in range(200):
            assert reader.next()[0] == b"T"
            kind, body = reader.next()
            length = int.from_bytes(body[2:6], "big")
            assert kind == b"D" and body[6 : 6 + length] == str(n).encode()
            assert reader.until(b"C", 1) == [b"INSERT 0 1\0"]
            assert reader.next() == (b"Z", b"I")
    finally:
        sock.close()
    assert pg.http.rows("SELECT count(*) FROM w", db=db) == [[200]]


def test_a_client_that_ends_behind_its_commits_gets_their_answers_first(pg: PgServer, db: str):
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    sock, _ = _reader_of(pg, db)
    try:
        inserts = b"".join(query_message(f"INSERT INTO t VALUES ({n})") for n in range(50))
        sock.sendall(inserts + b"X\0\0\0\x04")  # Terminate right behind them
        answers = read_until_closed(sock)
    finally:
        sock.close()
    assert answers.count(b"INSERT 0 1\0") == 50
    assert pg.http.rows("SELECT count(*) FROM t", db=db) == [[50]]


CONNECTIONS = 16


def test_many_writers_at_once_each_get_their_own_answers_once_in_order(pg: PgServer, db: str):
    # 16 connections at once, each pipelining INSERT ... RETURNING its own values, and one
    # more that goes away with its answers unread: the answers are sent by whichever worker
    # the acknowledging thread's ring wakes, so each connection must get exactly its own
    # answers, each once, in its order, whoever sent them.
    pg.http.sql("CREATE TABLE m (id INT PRIMARY KEY, who INT)", db=db)
    errors: list[BaseException] = []

    def writer(who: int) -> None:
        sock, reader = _reader_of(pg, db)
        try:
            for batch in range(5):
                ids = [who * 1000 + batch * 20 + n for n in range(20)]
                sock.sendall(
                    b"".join(
                        query_message(f"INSERT INTO m VALUES ({i}, {who}) RETURNING id, who")
                        for i in ids
                    )
                )
                for i in ids:
                    assert reader.next()[0] == b"T"
                    kind, body = reader.next()
                    assert kind == b"D"
                    length = int.from_bytes(body[2:6], "big")
                    assert body[6 : 6 + length] == str(i).encode()
                    assert reader.until(b"C", 1) == [b"INSERT 0 1\0"]
                    assert reader.next() == (b"Z", b"I")
        except BaseException as error:  # reported by the test's thread
            errors.append(error)
        finally:
            sock.close()

    gone, _ = _reader_of(pg, db)
    threads = [threading.Thread(target=writer, args=(who,)) for who in range(1, CONNECTIONS + 1)]
    for thread in threads:
        thread.start()
    gone.sendall(b"".join(query_message(f"INSERT INTO m VALUES ({n}, 0)") for n in range(100)))
    gone.close()  # its answers have no one to go to; the others' must not be disturbed
    for thread in threads:
        thread.join(60)
    assert not errors, errors[0]
    rows = pg.http.rows("SELECT who, count(*) FROM m WHERE who > 0 GROUP BY who", db=db)
    assert sorted(map(tuple, rows)) == [(who, 100) for who in range(1, CONNECTIONS + 1)]
    with pg.connect(db) as conn:  # the server goes on answering
        assert conn.execute("INSERT INTO m VALUES (-1, -1) RETURNING id").fetchone() == (-1,)
