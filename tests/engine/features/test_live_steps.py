"""The streams of a pass that take the step another stream of their query made, in one call
(`SubscriptionManager.take_steps`): each reads what its own attempt would have given it (its
subscription's next version, the shared change, its wait going on), and the call stops,
touching nothing, at the first stream its own attempt must answer otherwise (spec: subscribe,
rights at every request; a newer request of a client takes over)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_kept import KEPT_VERSIONS
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.errors import KdbError
from tests.engine.features.candles import CANDLES_OF, TRADES
from tests.hypothesis_settings import OVER_FIXTURE

USERS = (None, "alice", "bob")  # None: the admin
SYMBOLS = ("NABIL", "ADBL")
RIGHTS = ("REVOKE SELECT ON trades FROM alice", "GRANT SELECT ON trades TO alice")


def _connect(path):
    connection = refimpl.connect(path)
    connection.execute(TRADES)
    for symbol in SYMBOLS:
        connection.execute(f"INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', '{symbol}', 1)")
    for user in USERS[1:]:
        connection.execute(f"CREATE USER {user}")
        connection.execute(f"GRANT SELECT ON trades TO {user}")
    return connection


@pytest.fixture
def conn(tmp_path):
    connection = _connect(tmp_path / "data")
    yield connection
    connection.close()


def _session(conn, user: str | None):
    return conn.instance.session("demo", Principal(user)) if user else conn.session()


def _streams(conn, opened: list[tuple[str | None, str]]) -> list[LiveWait]:
    """A stream's wait for each (user, symbol), each on the wake board."""
    manager = conn.instance.subscriptions
    waits = []
    for user, symbol in opened:
        session = _session(conn, user)
        snapshot = manager.ask_now(session, CANDLES_OF.format(symbol=symbol), None)
        step = manager.follow(session, snapshot)
        assert isinstance(step, LiveWait)
        step.watch(threading.Event())
        waits.append(step)
    return waits


def _trade(conn, second: int, symbol: str = "NABIL") -> None:
    conn.execute(f"INSERT INTO trades VALUES ('2026-09-24T10:00:{second}Z', '{symbol}', {second})")


def test_the_streams_after_the_first_take_its_step_in_one_call(conn):
    waits = _streams(conn, [(None, "NABIL"), ("alice", "NABIL"), ("bob", "NABIL")])
    _trade(conn, 40)
    reads = PassReads()
    made = waits[0].attempt(True, None, reads)
    assert made is not None and made.kind == "rows"
    manager = conn.instance.subscriptions
    first, versions = manager.take_steps(waits[1:], reads)
    assert first is not None and first.change is made.change  # one change, encoded once
    assert first.subscription is waits[1].subscription and first.version == versions[0]
    assert versions == [2, 2]
    for wait in waits[1:]:
        subscription = wait.subscription
        assert subscription.current.version == 2
        assert subscription.current.answer is made.subscription.current.answer
        assert subscription.token == made.subscription.token
        assert wait.holds()  # it goes on, as `follow` gives it back
        assert wait.attempt(True, None, reads) is None  # nothing left to answer
    # Marked asked once sent (as `follow` marks the first's, not called here).
    assert [s for _, taken in reads.asked for s in taken] == [w.subscription for w in waits[1:]]


def test_no_step_made_in_the_pass_takes_none(conn):
    waits = _streams(conn, [(None, "NABIL"), (None, "NABIL")])
    _trade(conn, 40)
    first, versions = conn.instance.subscriptions.take_steps(waits, PassReads())
    assert (first, versions) == (None, [])
    assert all(w.subscription.current.version == 1 for w in waits)


def _stops_at(conn, waits: list[LiveWait], at: int) -> PassReads:
    """The first wait makes the step; the call takes those before `at`, then stops."""
    reads = PassReads()
    assert waits[0].attempt(True, None, reads) is not None
    before = [w.subscription.current.version for w in waits]
    _, versions = conn.instance.subscriptions.take_steps(waits[1:], reads)
    assert len(versions) == at - 1
    after = [w.subscription.current.version for w in waits]
    assert after[at:] == before[at:]  # untouched from the one it stopped at
    return reads


def test_it_stops_at_a_stream_whose_right_is_gone(conn):
    waits = _streams(conn, [(None, "NABIL"), ("bob", "NABIL"), ("alice", "NABIL"), (None, "NABIL")])
    _trade(conn, 40)
    conn.execute("REVOKE SELECT ON trades FROM alice")
    reads = _stops_at(conn, waits, 2)
    with pytest.raises(KdbError, match="alice"):  # its own attempt refuses it
        waits[2].attempt(True, None, reads)


def test_it_stops_at_a_stream_a_newer_request_took_over(conn):
    waits = _streams(conn, [(None, "NABIL"), (None, "NABIL"), (None, "NABIL")])
    _trade(conn, 40)
    taken_over = waits[2].subscription
    session = _session(conn, None)
    manager = conn.instance.subscriptions
    newer = manager.ask(session, taken_over.text, f"{taken_over.id}.1")
    assert isinstance(newer, LiveWait)  # its client's newer request waits instead
    _stops_at(conn, waits, 2)
    assert not waits[2].holds()


def test_it_stops_at_another_query(conn):
    waits = _streams(conn, [(None, "NABIL"), (None, "ADBL"), (None, "NABIL")])
    _trade(conn, 40)
    _trade(conn, 41, "ADBL")
    _stops_at(conn, waits, 1)


@settings(OVER_FIXTURE, max_examples=20)
@given(
    opened=st.lists(
        st.tuples(st.sampled_from(USERS), st.sampled_from(["NABIL", "ADBL"])),
        min_size=1,
        max_size=6,
    ),
    commits=st.lists(
        st.one_of(
            st.sampled_from(["NABIL", "ADBL"]),
            st.sampled_from(
                ["REVOKE SELECT ON trades FROM alice", "GRANT SELECT ON trades TO alice"]
            ),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_a_pass_in_calls_answers_what_each_stream_would_alone(tmp_path_factory, opened, commits):
    """Two servers, the same streams and commits: one makes each part by its own attempt,
    the other as the woken pass does (a part made, then those after it that take its step
    in one call, and so on); every stream reads the same versions and rows, or end."""
    worlds: list[tuple[Any, list[LiveWait | None], list[list]]] = []
    for _ in range(2):
        conn = _connect(tmp_path_factory.mktemp("steps") / "data")
        open_waits: list[LiveWait | None] = list(_streams(conn, opened))
        worlds.append((conn, open_waits, [[] for _ in opened]))
    try:
        for second, commit in enumerate(commits, start=20):
            for batched, (conn, waits, read) in enumerate(worlds):
                if commit.startswith(("REVOKE", "GRANT")):
                    conn.execute(commit)
                    continue
                _trade(conn, second, commit)
                _pass(conn, waits, read, batched=bool(batched))
        assert worlds[0][2] == worlds[1][2]
    finally:
        for conn, _, _ in worlds:
            conn.close()


def _pass(conn, waits: list[LiveWait | None], read: list[list], batched: bool) -> None:
    """One woken pass over the streams still open: each one's part in `read`."""
    reads = PassReads()
    at = 0
    while at < len(waits):
        wait = waits[at]
        at += 1
        if wait is None:
            continue
        try:
            reply = wait.attempt(True, None, reads)
        except KdbError:
            read[at - 1].append("ended")
            waits[at - 1] = None
            continue
        if reply is None:
            continue
        read[at - 1].append((reply.version, reply.rows))
        if not batched:
            continue
        rest = [w for w in waits[at:] if w is not None]
        first, versions = conn.instance.subscriptions.take_steps(rest, reads)
        for wait_taken, version in zip(rest, versions):  # noqa: B905 - `rest` may be longer
            index = waits.index(wait_taken)
            assert first is not None
            read[index].append((version, first.rows))
        at = waits.index(rest[len(versions)]) if len(versions) < len(rest) else len(waits)


def test_past_the_kept_versions_each_stream_keeps_its_own_eight(conn):
    """Streams that take the step in one call, commit after commit past KEPT_VERSIONS: each
    subscription keeps its newest eight versions, each the answer its own attempts would
    keep (the first's at that number), its owner's rows counted as a recount finds them, and
    a request with the id of its oldest kept version is answered with the difference."""
    manager = conn.instance.subscriptions
    waits = _streams(conn, [(None, "NABIL"), (None, "NABIL")])
    # The third begins a commit later: its numbers are one behind the others'.
    _trade(conn, 20)
    reads = PassReads()
    assert waits[0].attempt(True, None, reads) is not None
    assert manager.take_steps(waits[1:], reads)[1] == [2]
    waits += _streams(conn, [("alice", "NABIL")])
    for second in range(21, 21 + KEPT_VERSIONS + 4):
        _trade(conn, second)
        reads = PassReads()
        assert waits[0].attempt(True, None, reads) is not None
        _, versions = manager.take_steps(waits[1:], reads)
        assert versions == [second - 18, second - 19]
    first = waits[0].subscription
    for wait in waits:
        subscription = wait.subscription
        numbers = list(subscription.versions)
        assert len(numbers) == KEPT_VERSIONS and numbers == sorted(numbers)
        newest = numbers[-1]
        for number, version in subscription.versions.items():
            assert version.version == number
            assert version.answer is first.versions[number + first.current.version - newest].answer
        asked = f"{subscription.id}.{numbers[0]}"
        reply = manager.ask_now(wait.session, CANDLES_OF.format(symbol="NABIL"), asked)
        assert reply.kind == "rows" and reply.version == newest
    for owner in {w.subscription.owner for w in waits}:
        recount = sum(
            len(version.rows)
            for w in waits
            if w.subscription.owner == owner
            for version in w.subscription.versions.values()
        )
        assert manager._kept_rows[owner] == recount


def test_the_steps_taken_in_one_call_are_counted_when_the_pass_ends(conn):
    """Each stream that takes the step counts as a run again that answered rows, as its own
    attempt would count, once the pass ends (before its parts are sent), not before."""
    waits = _streams(conn, [(None, "NABIL"), (None, "NABIL"), ("alice", "NABIL")])
    manager = conn.instance.subscriptions

    def counted() -> tuple[int, int]:
        measures = manager.counts.snapshot({})
        return measures.reruns.get("demo", 0), measures.answers.get(("demo", "rows"), 0)

    before = counted()
    _trade(conn, 40)
    with PassReads() as reads:
        assert waits[0].attempt(True, None, reads) is not None
        assert manager.take_steps(waits[1:], reads)[1] == [2, 2]
        assert counted() == before
    assert counted() == (before[0] + 3, before[1] + 3)
