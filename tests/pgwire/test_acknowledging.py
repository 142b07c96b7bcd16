"""Acknowledgements of commits: handed back in order once durable, a failed flush handed
back as the error, every one handed back before `close` returns; and over the protocol,
nothing a client was told committed is lost when the server is killed."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from refimpl.engine.instance import Instance
from refimpl.errors import KdbError, WritesStopped
from refimpl.pgwire.acknowledging import Acknowledging
from tests.http.conftest import start_server
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
