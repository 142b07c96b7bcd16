"""Every answer a pass of woken live queries makes is made while the flush runs, the wait left
to the pass (`PassReads.settle`), as a maintained query's (tests/engine/features/
test_live_durable.py): a time-bucketed query that is not maintained, which re-runs only the
buckets a commit changed, read from the log's newest records; and a stream's next events
when its subscription is gone (a fresh snapshot, `SubscriptionManager.follow` as `ask`).
No answer shows a commit before it is durable: without a pass, the answer waits for the
flush; in a pass, `settle` does, and a failed log is the answer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from refimpl import Connection
from refimpl.engine.features import buckets
from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.errors import WritesStopped
from tests.engine.features.candles import CANDLES, CANDLES_OF, TRADES
from tests.engine.features.held_disk import (
    FIRST_TRADE,
    SOON,
    WHILE,
    HeldDisk,
    commit_held,
    connected,
    in_thread,
)

# Bucketed (a minute's) and not maintained (count(DISTINCT)): a commit re-runs the buckets
# it changed, found in the log's records since the answer.
BUCKETED = (
    "SUBSCRIBE SELECT date_trunc('minute', time) AS m, count(DISTINCT price) AS n,"
    " max(price) AS high FROM trades WHERE symbol = 'NABIL' GROUP BY m ORDER BY m"
)


@pytest.fixture
def disk() -> HeldDisk:
    return HeldDisk()


@pytest.fixture
def conn(tmp_path, disk: HeldDisk) -> Iterator[Connection]:
    yield from connected(tmp_path, disk, TRADES, FIRST_TRADE)


@pytest.fixture
def bucket_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each search of the changed buckets found (None: the query ran in full)."""
    found: list[Any] = []
    search = buckets.changed_buckets

    def noted(*args: Any, **kwargs: Any) -> Any:
        got = search(*args, **kwargs)
        found.append(got)
        return got

    monkeypatch.setattr(buckets, "changed_buckets", noted)
    return found


def _wait(conn: Connection) -> LiveWait:
    manager = conn.instance.subscriptions
    session = conn.session()
    step = manager.follow(session, manager.ask_now(session, BUCKETED, None))
    assert isinstance(step, LiveWait)
    assert not step.subscription.maintained and step.subscription.buckets is not None
    step.watch(threading.Event())
    return step


def test_a_bucket_rerun_in_a_pass_is_made_before_the_flush_and_settled_after(
    conn, disk, bucket_runs
):
    wait = _wait(conn)
    lsn, writer = commit_held(conn, disk)
    reads = PassReads()
    making, made = in_thread(lambda: wait.attempt(True, None, reads))
    making.join(SOON)
    assert not making.is_alive(), "the part waited for the flush before it was made"
    reply = made[0]
    assert isinstance(reply, Reply) and reply.kind == "rows", reply
    assert reply.rows == [(wait.subscription.current.answer.rows[(reply.rows[0][0],)][0], 2, 1530)]
    assert bucket_runs == [{reply.rows[0][0]}], "the changed bucket alone was run"
    database = conn.instance.database("demo")
    assert reads.needs == {database: lsn}
    settling, settled = in_thread(reads.settle)
    settling.join(WHILE)
    assert settling.is_alive(), "settle returned before the commit was durable"
    disk.release()
    settling.join(SOON)
    assert settled == [{}] and database.log.durable_lsn >= lsn
    writer.join(SOON)


def test_a_bucket_rerun_whose_log_fails_answers_the_failure(conn, disk, bucket_runs):
    wait = _wait(conn)
    commit_held(conn, disk)
    reads = PassReads()
    assert isinstance(wait.attempt(True, None, reads), Reply)
    disk.release(fail=True)
    assert isinstance(reads.settle()[conn.instance.database("demo")], WritesStopped)
    with pytest.raises(WritesStopped):
        wait.attempt(True, None, reads)


def test_a_bucket_rerun_without_a_pass_waits_for_the_flush(conn, disk, bucket_runs):
    wait = _wait(conn)
    commit_held(conn, disk)
    answering, answered = in_thread(wait.attempt)
    answering.join(WHILE)
    assert answering.is_alive(), "an answer was given before its commit was durable"
    disk.release()
    answering.join(SOON)
    reply = answered[0]
    assert isinstance(reply, Reply) and reply.rows[-1][1:] == (2, 1530)
    assert len(bucket_runs) == 1 and bucket_runs[0], "the changed bucket alone was run"


def test_a_snapshot_due_in_a_pass_is_made_before_the_flush_and_settled_after(conn, disk):
    manager = conn.instance.subscriptions
    session = conn.session()
    first = manager.ask_now(session, CANDLES, None)
    manager.per_user = 1  # the next subscription of this user evicts the first
    manager.ask_now(session, CANDLES_OF.format(symbol="OTHER"), None)
    lsn, writer = commit_held(conn, disk)
    reads = PassReads()
    # A stream's next events after `first`: its subscription is gone, a snapshot is due.
    making, made = in_thread(lambda: manager.follow(session, first, reads=reads))
    making.join(SOON)
    assert not making.is_alive(), "the snapshot waited for the flush before it was made"
    reply = made[0]
    assert isinstance(reply, Reply) and reply.kind == "snapshot", reply
    assert reply.subscription is not first.subscription and reply.rows[-1][-1] == 1530
    database = conn.instance.database("demo")
    assert reads.needs == {database: lsn}
    settling, settled = in_thread(reads.settle)
    settling.join(WHILE)
    assert settling.is_alive(), "settle returned before the commit was durable"
    disk.release(fail=True)
    settling.join(SOON)
    assert isinstance(settled[0], dict) and isinstance(settled[0][database], WritesStopped)
    writer.join(SOON)


def test_a_snapshot_due_without_a_pass_waits_for_the_flush(conn, disk):
    manager = conn.instance.subscriptions
    session = conn.session()
    first = manager.ask_now(session, CANDLES, None)
    manager.per_user = 1
    manager.ask_now(session, CANDLES_OF.format(symbol="OTHER"), None)
    commit_held(conn, disk)
    answering, answered = in_thread(lambda: manager.follow(session, first))
    answering.join(WHILE)
    assert answering.is_alive(), "a snapshot was given before its commit was durable"
    disk.release()
    answering.join(SOON)
    reply = answered[0]
    assert isinstance(reply, Reply) and reply.kind == "snapshot" and reply.rows[-1][-1] == 1530
