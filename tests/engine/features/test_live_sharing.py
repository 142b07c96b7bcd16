"""Live queries woken by one commit share one run per distinct query and one change
(spec: subscribe, what wakes a waiting request)."""

from __future__ import annotations

import threading
import time

import pytest

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_queries import LiveWait, Reply, SubscriptionManager
from refimpl.errors import Forbidden
from tests.engine.features.candles import CANDLES_OF, TRADES


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    connection.execute(TRADES)
    connection.execute(
        "INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 1510),"
        " ('2026-09-24T10:00:20Z', 'NEPSE', 2750)"
    )
    yield connection
    connection.close()


def _count_runs(monkeypatch) -> list[int]:
    runs = [0]
    answer = SubscriptionManager._answer

    def counted(self, *args):
        runs[0] += 1
        return answer(self, *args)

    monkeypatch.setattr(SubscriptionManager, "_answer", counted)
    return runs


def _attempted(waits: list[LiveWait]) -> list[Reply]:
    """Each wait's reply after a commit; the test fails if one has none yet."""
    replies = [step.attempt() for step in waits]
    assert all(r is not None for r in replies), replies
    return [r for r in replies if r is not None]


def _waiting(conn, query: str, count: int) -> list[LiveWait]:
    manager = conn.instance.subscriptions
    waits = []
    for _ in range(count):
        session = conn.session()
        snapshot = manager.ask_now(session, query, None)
        step = manager.ask(session, query, snapshot.id)
        assert isinstance(step, LiveWait)
        step.watch(threading.Event())
        waits.append(step)
    return waits


def test_ten_subscriptions_of_one_query_share_one_run_and_one_change(conn, monkeypatch):
    waits = _waiting(conn, CANDLES_OF.format(symbol="NABIL"), 10)
    runs = _count_runs(monkeypatch)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    replies = _attempted(waits)
    assert runs[0] == 1
    assert all(r is not None and r.kind == "rows" for r in replies)
    assert {id(r.change) for r in replies} == {id(replies[0].change)}
    assert replies[0].rows == [(1790244000000000, 1510.0, 1512.0, 1510.0, 1512.0)]
    assert len({r.id for r in replies}) == 10  # each its own subscription and version


def test_the_same_query_written_otherwise_is_shared_too(conn, monkeypatch):
    spaced = CANDLES_OF.format(symbol="NABIL").replace(" FROM ", "  from  ")
    waits = _waiting(conn, CANDLES_OF.format(symbol="NABIL"), 2) + _waiting(conn, spaced, 2)
    runs = _count_runs(monkeypatch)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    replies = _attempted(waits)
    assert runs[0] == 1
    assert len({id(r.change) for r in replies}) == 1


def test_distinct_queries_run_apart(conn, monkeypatch):
    waits = _waiting(conn, CANDLES_OF.format(symbol="NABIL"), 3)
    waits += _waiting(conn, CANDLES_OF.format(symbol="NABIL").replace("max(", "min("), 3)
    runs = _count_runs(monkeypatch)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    replies = _attempted(waits)
    assert runs[0] == 2
    assert replies[0].rows != replies[3].rows


def test_a_later_commit_runs_again(conn, monkeypatch):
    query = CANDLES_OF.format(symbol="NABIL")
    first, second = _waiting(conn, query, 2)
    runs = _count_runs(monkeypatch)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    assert first.attempt() is not None
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:50Z', 'NABIL', 1490)")
    reply = second.attempt()
    assert runs[0] == 2
    assert reply is not None and reply.rows == [(1790244000000000, 1510.0, 1512.0, 1490.0, 1490.0)]


def test_a_subscriber_without_the_right_gets_no_shared_answer(conn):
    conn.execute("CREATE USER reader_u")
    conn.execute("GRANT SELECT ON trades TO reader_u")
    query = CANDLES_OF.format(symbol="NABIL")
    (admin,) = _waiting(conn, query, 1)
    manager = conn.instance.subscriptions
    session = conn.instance.session("demo", Principal("reader_u"))
    snapshot = manager.ask_now(session, query, None)
    step = manager.ask(session, query, snapshot.id)
    step.watch(threading.Event())
    conn.execute("REVOKE SELECT ON trades FROM reader_u")
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    assert admin.attempt() is not None
    with pytest.raises(Forbidden):
        step.attempt()


def test_following_a_reply_answers_as_asking_again_with_its_id(conn):
    """`follow` (a stream's next wait) gives what `ask` with the reply's id gives: the wait,
    or the difference a commit made since, under the same subscription."""
    manager = conn.instance.subscriptions
    session = conn.session()
    query = CANDLES_OF.format(symbol="NABIL")
    snapshot = manager.ask_now(session, query, None)
    step = manager.follow(session, snapshot)
    assert isinstance(step, LiveWait) and step.subscription is snapshot.subscription
    step.watch(threading.Event())
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    reply = step.attempt()
    assert reply is not None and reply.kind == "rows"
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:50Z', 'NABIL', 1490)")
    waiting = manager.follow(session, reply)
    assert isinstance(waiting, LiveWait)
    waiting.watch(threading.Event())
    newer = waiting.attempt()
    assert newer is not None and newer.id == f"{snapshot.subscription.id}.3"
    # Followed from the older reply: the difference to the newest version, at once.
    missed = manager.follow(session, reply)
    assert isinstance(missed, Reply) and missed.kind == "rows" and missed.id == newer.id
    assert missed.rows == [(1790244000000000, 1510.0, 1512.0, 1490.0, 1490.0)]


def test_following_checks_the_right_and_a_dropped_subscription_starts_again(conn):
    conn.execute("CREATE USER follower_u")
    conn.execute("GRANT SELECT ON trades TO follower_u")
    manager = SubscriptionManager(per_user=1)
    session = conn.instance.session("demo", Principal("follower_u"))
    query = CANDLES_OF.format(symbol="NABIL")
    first = manager.ask_now(session, query, None)
    manager.ask_now(session, query, None)  # over the user's bound: the first one goes
    again = manager.follow(session, first)
    assert isinstance(again, Reply) and again.kind == "snapshot"
    assert again.subscription is not first.subscription
    conn.execute("REVOKE SELECT ON trades FROM follower_u")
    with pytest.raises(Forbidden):
        manager.follow(session, again)


def test_a_kept_wait_goes_on_after_its_answer_and_misses_no_commit(conn):
    """A stream's wait that made its reply with `attempt(keep=True)` is its next wait: on
    the wake board all along, so a commit before the follow wakes it; a request that took
    the subscription over ends it instead."""
    manager = conn.instance.subscriptions
    session = conn.session()
    query = CANDLES_OF.format(symbol="NABIL")
    snapshot = manager.ask_now(session, query, None)
    wait = manager.follow(session, snapshot)
    assert isinstance(wait, LiveWait)
    woken = threading.Event()
    wait.watch(woken)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    reply = wait.attempt(keep=True)
    assert reply is not None and reply.kind == "rows"
    woken.clear()
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:50Z', 'NABIL', 1490)")
    assert woken.is_set()  # between the re-run and the follow: not missed
    assert manager.follow(session, reply, checked=True, wait=wait) is wait
    newer = wait.attempt(keep=True)
    assert newer is not None and newer.id == f"{snapshot.subscription.id}.3"
    assert newer.rows == [(1790244000000000, 1510.0, 1512.0, 1490.0, 1490.0)]
    taken = manager.ask(session, query, newer.id)  # another request of the subscription
    assert isinstance(taken, LiveWait)
    step = manager.follow(session, newer, checked=True, wait=wait)
    assert isinstance(step, LiveWait) and step is not wait
    woken.clear()
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:55Z', 'NABIL', 1491)")
    assert not woken.is_set()  # ended: off the wake board


def test_a_subscriber_woken_after_a_later_commit_takes_no_older_shared_step(conn, monkeypatch):
    """The step the first subscriber took from an answer is taken by the others only at
    the state it was taken at: after another commit, a subscriber that held the same
    answer gets the newer one."""
    first, second, third = _waiting(conn, CANDLES_OF.format(symbol="NABIL"), 3)
    runs = _count_runs(monkeypatch)
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    assert first.attempt() is not None
    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:50Z', 'NABIL', 1490)")
    later, last = second.attempt(), third.attempt()
    assert runs[0] == 2  # the third took the second's step
    for reply in (later, last):
        assert reply is not None and reply.id.endswith(".2")
        assert reply.rows == [(1790244000000000, 1510.0, 1512.0, 1490.0, 1490.0)]
    assert later is not None and last is not None and later.change is last.change


def test_a_query_runs_within_the_budget_and_a_shared_step_takes_none(conn, monkeypatch):
    """`attempt(budget=...)`: the subscriber that runs the query runs it within the budget
    (its statement timeout: the run checks the deadline the budget set); the others, who
    take its step, enter no budget. A follow that must make a snapshot makes it within it."""
    from refimpl.engine.query import deadlines

    waits = _waiting(conn, CANDLES_OF.format(symbol="NABIL"), 3)
    entered: list[int] = []
    sources_seen: list[object] = []
    answer = SubscriptionManager._answer

    def seen(self, *args):
        sources_seen.append(deadlines._current.get())
        return answer(self, *args)

    monkeypatch.setattr(SubscriptionManager, "_answer", seen)

    class Deadline:
        def statement_deadline(self) -> float:
            return time.monotonic() + 60

    def budget():
        entered.append(1)
        return deadlines.running(Deadline(), bulk=True)

    conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1512)")
    replies = [wait.attempt(True, budget) for wait in waits]
    assert all(r is not None and r.kind == "rows" for r in replies)
    assert len(entered) == 1  # one run, within the one budget
    assert len(sources_seen) == 1 and sources_seen[0] is not None
    # A follow whose version is no longer kept makes a snapshot: within the budget too.
    manager = conn.instance.subscriptions
    session = conn.session()
    reply = replies[0]
    assert reply is not None
    unkept = Reply("rows", reply.subscription, 999, reply.change)
    again = manager.follow(session, unkept, budget=budget)
    assert isinstance(again, Reply) and again.kind == "snapshot"
    assert len(entered) == 2 and sources_seen[-1] is not None
