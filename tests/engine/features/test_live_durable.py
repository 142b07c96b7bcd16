"""A live query's answers never show a commit before it is durable (spec: subscribe; the
log's durability), yet a pass of woken live queries makes them while the flush runs.

A commit wakes a wait only once it is durable, or once its flush failed (the pass then
answers the failure). A disk whose flush is held (`HeldDisk`) keeps a commit visible and
not durable: a pass (one that reads a commit newer than the one that woke it)
makes its part from the log's newest records in memory without waiting, and its `settle`
returns only once the flush has ended; if the flush fails, `settle` gives the failure and
every attempt of the pass raises it. Without a pass, an answer is given only once durable,
also a difference kept from a pass (`SubscriptionManager.ask` with an older version) and a
snapshot."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from refimpl import Connection
from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.errors import WritesStopped
from tests.engine.features.candles import CANDLES, TRADES
from tests.engine.features.held_disk import (
    FIRST_TRADE,
    SOON,
    WHILE,
    HeldDisk,
    commit_held,
    connected,
    in_thread,
)


@pytest.fixture
def disk() -> HeldDisk:
    return HeldDisk()


@pytest.fixture
def conn(tmp_path, disk: HeldDisk) -> Iterator[Connection]:
    yield from connected(tmp_path, disk, TRADES, FIRST_TRADE)


def _wait(conn: Connection) -> LiveWait:
    return _watched(conn)[0]


def _watched(conn: Connection) -> tuple[LiveWait, threading.Event]:
    """A wait on the wake board, and its waker."""
    manager = conn.instance.subscriptions
    session = conn.session()
    step = manager.follow(session, manager.ask_now(session, CANDLES, None))
    assert isinstance(step, LiveWait)
    woken = threading.Event()
    step.watch(woken)
    return step, woken


def test_a_wait_is_woken_once_its_commit_is_durable_not_at_the_commit(conn, disk):
    """The pass its wake-up starts finds the commit durable: it never waits for the flush,
    nor leads it, on the thread that makes its user's answers."""
    wait, woken = _watched(conn)
    lsn, writer = commit_held(conn, disk)
    assert not woken.wait(WHILE), "woken before the commit was durable"
    disk.release()
    assert woken.wait(SOON)
    assert conn.instance.database("demo").log.durable_lsn >= lsn
    reads = PassReads()
    reply = wait.attempt(True, None, reads)
    assert isinstance(reply, Reply) and reply.rows[-1][-1] == 1530
    assert reads.needs == {}
    writer.join(SOON)


def test_a_failed_flush_wakes_the_wait_whose_attempt_answers_the_failure(conn, disk):
    wait, woken = _watched(conn)
    commit_held(conn, disk)
    assert not woken.wait(WHILE)
    disk.release(fail=True)
    assert woken.wait(SOON)
    reads = PassReads()
    wait.attempt(True, None, reads)
    assert list(reads.settle()) == [conn.instance.database("demo")]
    with pytest.raises(WritesStopped):
        wait.attempt(True, None, reads)


def test_a_pass_makes_its_part_before_the_flush_and_sends_after(conn, disk):
    wait = _wait(conn)
    lsn, writer = commit_held(conn, disk)
    reads = PassReads()
    making, made = in_thread(lambda: wait.attempt(True, None, reads))
    making.join(SOON)
    assert not making.is_alive(), "the part waited for the flush before it was made"
    reply = made[0]
    assert isinstance(reply, Reply) and reply.kind == "rows"
    assert reply.rows[-1][-1] == 1530
    assert reads.needs == {conn.instance.database("demo"): lsn}
    settling, settled = in_thread(reads.settle)
    settling.join(WHILE)
    assert settling.is_alive(), "settle returned before the commit was durable"
    disk.release()
    settling.join(SOON)
    assert settled == [{}]
    assert conn.instance.database("demo").log.durable_lsn >= lsn
    writer.join(SOON)


def test_a_failed_flush_is_the_answer_of_every_part_of_the_pass(conn, disk):
    wait = _wait(conn)
    commit_held(conn, disk)
    reads = PassReads()
    assert isinstance(wait.attempt(True, None, reads), Reply)
    disk.release(fail=True)
    failures = reads.settle()
    assert list(failures) == [conn.instance.database("demo")]
    assert isinstance(failures[conn.instance.database("demo")], WritesStopped)
    with pytest.raises(WritesStopped):
        wait.attempt(True, None, reads)


def test_without_a_pass_an_answer_waits_for_the_flush(conn, disk):
    wait = _wait(conn)
    commit_held(conn, disk)
    answering, answered = in_thread(wait.attempt)
    answering.join(WHILE)
    assert answering.is_alive(), "an answer was given before its commit was durable"
    disk.release()
    answering.join(SOON)
    assert isinstance(answered[0], Reply) and answered[0].rows[-1][-1] == 1530


def test_a_difference_a_pass_made_waits_for_the_flush_when_asked_alone(conn, disk):
    wait = _wait(conn)
    subscription = wait.subscription
    held_version = subscription.current.version
    commit_held(conn, disk)
    reads = PassReads()
    assert isinstance(wait.attempt(True, None, reads), Reply)  # made, not yet settled
    manager = conn.instance.subscriptions
    asked = f"{subscription.id}.{held_version}"
    answering, answered = in_thread(lambda: manager.ask_now(conn.session(), CANDLES, asked))
    answering.join(WHILE)
    assert answering.is_alive(), "a kept difference was given before it was durable"
    disk.release(fail=True)
    answering.join(SOON)
    assert isinstance(answered[0], WritesStopped)


def test_a_snapshot_read_by_a_new_maintainer_waits_for_the_flush(conn, disk):
    """A maintained query's first snapshot reads the table as its maintainer's start: a
    commit visible and not durable then was shown at once before (8c640f6)."""
    commit_held(conn, disk)
    manager = conn.instance.subscriptions
    answering, answered = in_thread(lambda: manager.ask_now(conn.session(), CANDLES, None))
    answering.join(WHILE)
    assert answering.is_alive(), "a snapshot was given before its commit was durable"
    disk.release()
    answering.join(SOON)
    reply = answered[0]
    assert isinstance(reply, Reply) and reply.kind == "snapshot"
    assert reply.rows[-1][-1] == 1530
