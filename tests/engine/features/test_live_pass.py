"""The parts of one pass of woken streams read alike once (`PassReads`: the revision
counter, the right to read), yet each part answers what it would alone: a commit, a REVOKE,
a DROP USER or a DROP TABLE between two parts of a pass is seen by the later one (spec:
subscribe, what wakes a waiting request; rights at every request)."""

from __future__ import annotations

import threading

import pytest

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.access.control import AccessControl
from refimpl.engine.features.live_answers import Subscription
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.errors import KdbError
from tests.engine.features.candles import CANDLES, TRADES


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    connection.execute(TRADES)
    connection.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 1510)")
    for user in ("alice", "bob"):
        connection.execute(f"CREATE USER {user}")
        connection.execute(f"GRANT SELECT ON trades TO {user}")
    yield connection
    connection.close()


def _streams(conn, users: list[str | None]) -> list[LiveWait]:
    """A stream's wait for each user (None: the admin), each on the wake board."""
    manager = conn.instance.subscriptions
    waits = []
    for user in users:
        session = conn.instance.session("demo", Principal(user)) if user else conn.session()
        snapshot = manager.ask_now(session, CANDLES, None)
        step = manager.follow(session, snapshot)
        assert isinstance(step, LiveWait)
        step.watch(threading.Event())
        waits.append(step)
    return waits


def _trade(conn, second: int, price: int) -> None:
    conn.execute(f"INSERT INTO trades VALUES ('2026-09-24T10:00:{second}Z', 'NABIL', {price})")


def test_a_pass_reads_the_counter_and_the_right_once(conn, monkeypatch):
    waits = _streams(conn, ["alice", "alice", "alice"])
    counted = {"counter": 0, "check": 0}
    counter, check = Subscription.counter, AccessControl.check

    def counting_counter(self):
        counted["counter"] += 1
        return counter(self)

    def counting_check(self, *args):
        counted["check"] += 1
        return check(self, *args)

    monkeypatch.setattr(Subscription, "counter", counting_counter)
    monkeypatch.setattr(AccessControl, "check", counting_check)
    _trade(conn, 40, 1512)
    reads = PassReads()
    replies = [waits[0].attempt(True, None, reads)]
    assert counted["counter"] == 1  # (the query's run checks rights of its own)
    counted["check"] = 0
    replies += [wait.attempt(True, None, reads) for wait in waits[1:]]
    assert all(r is not None and r.kind == "rows" for r in replies)
    assert counted == {"counter": 1, "check": 0}  # the others took the first's step
    assert len({r.id for r in replies if r is not None}) == 3  # each its own subscription's


@pytest.mark.parametrize("keep", [True, False])  # a stream's part, a long poll's
def test_a_commit_between_two_parts_of_a_pass_is_in_the_later_one(conn, keep):
    first, second = _streams(conn, [None, None])
    reads = PassReads()
    _trade(conn, 40, 1512)
    earlier = first.attempt(keep, None, reads)
    assert earlier is not None and earlier.rows == [
        (1790244000000000, 1510.0, 1512.0, 1510.0, 1512.0)
    ]
    _trade(conn, 50, 1490)  # the pass read the counter before it
    later = second.attempt(keep, None, reads)
    assert later is not None and later.rows == [(1790244000000000, 1510.0, 1512.0, 1490.0, 1490.0)]


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("how", ["REVOKE SELECT ON trades FROM alice", "DROP USER alice"])
def test_losing_the_right_between_two_parts_of_a_pass_ends_exactly_the_later_one(conn, how, keep):
    first, second, other = _streams(conn, ["alice", "alice", "bob"])
    reads = PassReads()
    _trade(conn, 40, 1512)
    assert first.attempt(keep, None, reads) is not None
    conn.execute(how)
    with pytest.raises(KdbError, match="alice"):
        second.attempt(keep, None, reads)
    reply = other.attempt(keep, None, reads)  # bob's right stands
    assert reply is not None and reply.kind == "rows"


@pytest.mark.parametrize("keep", [True, False])  # a stream's part, a long poll's
def test_a_refusal_is_checked_again_at_each_part(conn, keep):
    """A refused check is not kept: a GRANT within the pass lets the next part through."""
    first, second = _streams(conn, ["alice", "alice"])
    conn.execute("REVOKE SELECT ON trades FROM alice")
    reads = PassReads()
    _trade(conn, 40, 1512)
    with pytest.raises(KdbError, match="alice"):
        first.attempt(keep, None, reads)
    conn.execute("GRANT SELECT ON trades TO alice")
    reply = second.attempt(keep, None, reads)
    assert reply is not None and reply.kind == "rows"


@pytest.mark.parametrize("keep", [True, False])  # a stream's part, a long poll's
def test_a_table_dropped_between_two_parts_of_a_pass_ends_the_later_one(conn, keep):
    first, second = _streams(conn, [None, None])
    reads = PassReads()
    _trade(conn, 40, 1512)
    assert first.attempt(keep, None, reads) is not None
    conn.execute("DROP TABLE trades")
    with pytest.raises(KdbError, match="trades"):
        second.attempt(keep, None, reads)


def test_a_pass_counts_its_runs_again_when_it_ends(conn):
    """The measures count each part's run again and its answer, as parts made apart would,
    once the pass ends (before its parts are sent)."""
    streams = _streams(conn, [None, None, "alice"])
    counts = conn.instance.subscriptions.counts

    def counted() -> tuple[int, int]:
        measures = counts.snapshot({})
        return measures.reruns.get("demo", 0), measures.answers.get(("demo", "rows"), 0)

    before = counted()
    _trade(conn, 40, 1512)
    with PassReads() as reads:
        assert all(wait.attempt(True, None, reads) is not None for wait in streams)
        assert counted() == before
    assert counted() == (before[0] + 3, before[1] + 3)
    conn.execute("REVOKE SELECT ON trades FROM alice")
    _trade(conn, 50, 1490)
    with PassReads() as reads:
        assert all(wait.attempt(True, None, reads) is not None for wait in streams[:2])
        with pytest.raises(KdbError):
            streams[2].attempt(True, None, reads)  # refused: a run again, no answer
    assert counted() == (before[0] + 6, before[1] + 5)


def test_a_pass_marks_its_subscriptions_asked_once_sent_in_the_order_made(conn):
    """A part's subscription is marked asked (the newest, for the bounds' eviction and the
    idle sweep) when its pass's parts are sent, in the order the parts were made: as a mark
    at each part leaves it; one dropped meanwhile is not put back."""
    manager = conn.instance.subscriptions
    waits = _streams(conn, [None, None, None])
    subscriptions = [wait.subscription for wait in waits]
    _trade(conn, 40, 1512)
    reads = PassReads()
    made = [waits[i].attempt(True, None, reads) for i in (2, 0, 1)]
    for wait, reply in zip((waits[2], waits[0], waits[1]), made, strict=True):
        assert reply is not None
        assert manager.follow(conn.session(), reply, True, wait, None, reads) is wait
    marked_before = [s.last_asked for s in subscriptions]
    order_before = list(manager._subscriptions)  # not marked yet
    assert order_before[-3:] == [s.id for s in subscriptions]
    manager._drop(subscriptions[1])
    reads.touch_asked()
    assert list(manager._subscriptions)[-2:] == [subscriptions[2].id, subscriptions[0].id]
    assert subscriptions[1].id not in manager._subscriptions
    assert subscriptions[0].last_asked > marked_before[0]
    assert subscriptions[1].last_asked == marked_before[1]
    assert reads.asked == []  # marked once: nothing is left to mark
