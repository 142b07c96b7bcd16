"""Acknowledgements of commits: handed back in order once durable, a failed flush handed
back as the error, every one handed back before `close` returns; and over the protocol,
nothing a client was told committed is lost when the server is killed."""

from __future__ import annotations

import functools
import signal
import socket
import threading
import time
from pathlib import Path

import psycopg
import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER_SIZE
from refimpl.errors import KdbError, WritesStopped
from refimpl.pgwire.acknowledging import Acknowledging
from tests.http.conftest import start_server
from tests.observed_fsyncs import ObservedFsyncs
from tests.pgwire.attack import MessageReader, logged_in, query_message, read_until_closed
from tests.pgwire.conftest import PgServer, pg_address

WAIT = 10.0


def test_answers_are_handed_back_in_order_once_their_wait_returned():
    handed: list[tuple[int, KdbError | None]] = []
    gate = threading.Event()
    acks: Acknowledging[int] = Acknowledging(handed.extend)

    def wait_gate() -> None:
        gate.wait(WAIT)

    try:
        acks.hand_over(1, wait_gate, gate.is_set)
        for item in range(2, 6):
            acks.hand_over(item, lambda: None, gate.is_set)
        time.sleep(0.05)
        assert handed == []  # the first wait holds the round: nothing goes out before it
        gate.set()
    finally:
        acks.close()
    assert handed == [(n, None) for n in range(1, 6)]


def test_a_failed_flush_hands_back_the_error_and_the_thread_goes_on():
    handed: list[tuple[str, KdbError | None]] = []
    acks: Acknowledging[str] = Acknowledging(handed.extend)

    def failing() -> None:
        raise WritesStopped("the disk is full")

    def bug(answers: list[tuple[str, KdbError | None]]) -> None:
        raise RuntimeError("a bug in sending")

    try:
        acks.hand_over("lost", failing, lambda: False)
        acks.hand_over("kept", lambda: None, lambda: True)
    finally:
        acks.close()
    assert handed[0][0] == "lost" and isinstance(handed[0][1], WritesStopped)
    assert handed[1] == ("kept", None)
    broken: Acknowledging[str] = Acknowledging(bug)
    broken.hand_over("a", lambda: None, lambda: True)
    broken.close()  # a bug in the callback is logged; close still returns


def test_answers_a_rounds_flush_made_durable_go_back_with_it_in_one_call():
    # Answers 2 and 3 are handed over while answer 1's flush runs, which makes their
    # commits durable too: they go back with answer 1, in the round's one call (the
    # server's one wake-up for them all), not in a round of their own. Answer 4's commit
    # came after that flush: it waits for the next, in the next round.
    events: list[object] = []
    flushing, go_on = threading.Event(), threading.Event()
    durable = [0]

    def flush_through_3() -> None:
        flushing.set()
        go_on.wait(WAIT)
        durable[0] = 3

    def flush_4() -> None:
        events.append("flush 4")
        durable[0] = 4

    acks: Acknowledging[int] = Acknowledging(lambda answers: events.extend([*answers, "rung"]))
    try:
        acks.hand_over(1, flush_through_3, lambda: durable[0] >= 1)
        assert flushing.wait(WAIT)
        acks.hand_over(2, lambda: None, lambda: durable[0] >= 2)
        acks.hand_over(3, lambda: None, lambda: durable[0] >= 3)
        acks.hand_over(4, flush_4, lambda: durable[0] >= 4)
        go_on.set()
    finally:
        acks.close()
    assert events == [(1, None), (2, None), (3, None), "rung", "flush 4", (4, None), "rung"]


class Durable:
    """Whether record `lsn` of `log` is durable now."""

    def __init__(self, log: WriteAheadLog, lsn: int) -> None:
        self.log, self.lsn = log, lsn

    def __call__(self) -> bool:
        return self.log.durable_lsn >= self.lsn


PAYLOAD = b"p" * 40
SENDERS = 8
PER_SENDER = 150


@pytest.mark.parametrize("fail_at", [None, 12])
def test_no_answer_goes_back_before_its_record_is_on_disk(tmp_path: Path, fail_at: int | None):
    # Many committers hand over answers while flushes run (each a little slow), some
    # waiting for their answers as clients do, some not: every answer handed back without
    # an error is one whose record (and every one before it) a returned fsync covered,
    # whether it was waited for or found durable by the round's look at those handed over
    # meanwhile; after a failed fsync nothing is acknowledged; each answer goes back once,
    # in each committer's order.
    files = ObservedFsyncs(fail_at)
    log = WriteAheadLog(tmp_path / "log", fsync_delay=0.0005, files=files)
    write_lock = threading.Lock()
    frame = HEADER_SIZE + len(PAYLOAD)
    wrong: list[str] = []
    handed: dict[int, list[tuple[int, bool]]] = {sender: [] for sender in range(SENDERS)}
    answered = [threading.Semaphore(0) for _ in range(SENDERS)]

    def on_round(answers: list[tuple[tuple[int, int], KdbError | None]]) -> None:
        for (sender, lsn), error in answers:
            if error is None and files.durable_bytes() < lsn * frame:
                wrong.append(f"LSN {lsn} answered with {files.durable_bytes()} bytes on disk")
            handed[sender].append((lsn, error is None))
            answered[sender].release()

    acks: Acknowledging[tuple[int, int]] = Acknowledging(on_round)

    def commit(sender: int) -> None:
        for n in range(PER_SENDER):
            try:
                with write_lock:
                    lsn = log.append(PAYLOAD)
            except WritesStopped:
                return
            acks.hand_over(
                (sender, lsn), functools.partial(log.wait_durable, lsn), Durable(log, lsn)
            )
            if sender % 2 == 0 or n % 10 == 9:
                answered[sender].acquire()  # as a client that waits for its answer

    threads = [threading.Thread(target=commit, args=(s,)) for s in range(SENDERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        acks.close()
        log.close()
    assert not wrong, wrong[:3]
    assert files.synced_writes > 0  # the flushes were the log's one call, write and sync
    failed_from = None
    for sender, answers in handed.items():
        lsns = [lsn for lsn, _ in answers]
        assert lsns == sorted(set(lsns)), f"sender {sender}: not once each, in order"
        for lsn, ok in answers:
            if not ok:
                failed_from = lsn if failed_from is None else min(failed_from, lsn)
    if fail_at is None:
        assert failed_from is None
        assert sum(len(a) for a in handed.values()) == SENDERS * PER_SENDER
    else:
        assert failed_from is not None
        acknowledged = [lsn for a in handed.values() for lsn, ok in a if ok]
        assert all(lsn < failed_from for lsn in acknowledged)


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
            # One transaction, as in PostgreSQL: the error undoes the INSERT before it.
            conn.execute("INSERT INTO t VALUES (3); INSERT INTO t VALUES (1)")
        assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]
        with conn.pipeline():  # many writes and reads sent before any answer is read
            results = [conn.execute(f"INSERT INTO t VALUES ({n})") for n in range(10, 30)]
            counted = conn.execute("SELECT count(*) FROM t")
        assert [r.rowcount for r in results] == [1] * 20
        assert counted.fetchone() == (22,)


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
