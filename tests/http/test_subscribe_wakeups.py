"""A live-query long poll is woken by the commits that touch it, never by its own parking,
and its user's batch of woken queries answers it (refimpl.http.endpoints.subscribe_route's
wake-up, with a real engine and a real waiting room)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_queries import LiveWait
from refimpl.http.encode import Answer
from refimpl.http.endpoints.subscribe_route import _Poll, encode_reply, reply_event, woken
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom

QUERY = "SUBSCRIBE SELECT s, count(*) AS n FROM t GROUP BY s ORDER BY s"


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    connection.execute("CREATE TABLE t (s STRING, v INT)")
    connection.execute("INSERT INTO t VALUES ('a', 1)")
    yield connection
    connection.close()


def _waiting(conn, session=None) -> LiveWait:
    manager = conn.instance.subscriptions
    session = session or conn.session()
    snapshot = manager.ask_now(session, QUERY, None)
    step = manager.ask(session, QUERY, snapshot.id)
    assert isinstance(step, LiveWait)
    return step


def _parked(room: WaitingRoom, step: LiveWait, owner: str, deadline: float):
    poll = _Poll(step, woken(room, owner), contextlib.nullcontext)
    step.watch(poll)
    parked: Parked[Answer] = Parked(
        None, 0, poll.attempt, lambda: Answer(b"none"), deadline, lambda: None, kind=Kind.LIVE
    )
    return poll, parked


@pytest.mark.parametrize("woken_before_attach", [True, False])
def test_a_commit_wakes_the_request_whenever_it_comes(conn, room, woken_before_attach):
    poll, parked = _parked(room, _waiting(conn), "u", time.monotonic() + 60)
    room.park(parked)
    if woken_before_attach:
        conn.execute("INSERT INTO t VALUES ('a', 2)")  # before the route handed it over
        poll.attach(parked)
    else:
        poll.attach(parked)
        conn.execute("INSERT INTO t VALUES ('a', 2)")
    body = parked.wait().body
    assert b"event: rows" in body and b'"rows":[["a",2]]' in body, body


def test_parking_alone_does_not_run_the_query(conn, room):
    step = _waiting(conn)
    attempts: list[int] = []
    attempt = step.attempt

    def counted(*args: Any, **kwargs: Any) -> Reply | None:
        attempts.append(1)
        return attempt(*args, **kwargs)

    step.attempt = counted  # type: ignore[method-assign]
    poll, parked = _parked(room, step, "u", time.monotonic() + 0.2)
    room.park(parked)
    poll.attach(parked)
    assert parked.wait().body == b"none"  # answered at its deadline, never attempted
    assert attempts == []


def test_one_commit_answers_every_request_of_a_user_and_a_lost_right_is_an_error(conn, room):
    conn.execute("CREATE USER poll_u")
    conn.execute("GRANT SELECT ON t TO poll_u")
    user = conn.instance.session("demo", Principal("poll_u"))
    admin = [_parked(room, _waiting(conn), "admin", time.monotonic() + 60) for _ in range(5)]
    (revoked,) = [_parked(room, _waiting(conn, user), "poll_u", time.monotonic() + 60)]
    for poll, parked in [*admin, revoked]:
        room.park(parked)
        poll.attach(parked)
    conn.execute("REVOKE SELECT ON t FROM poll_u")
    conn.execute("INSERT INTO t VALUES ('b', 3)")
    bodies = [parked.wait().body for _, parked in admin]
    assert all(b'"rows":[["b",1]]' in body for body in bodies), bodies
    error = revoked[1].wait()
    assert error.status_code == 403
    assert "poll_u" in json.loads(error.body)["error"]


def test_what_a_batch_leaves_to_do_after_its_answers_runs_at_its_end(room):
    """The server's re-arm of an answered connection (`WaitingRoom.after_round`) waits for
    the rest of the user's batch: it runs once every answer of the pass is handed over."""
    order: list[str] = []

    class Answering:
        def __init__(self, name: str) -> None:
            self.name = name

        def make(self) -> Callable[[], None]:
            def hand_over() -> None:
                room.after_round(lambda: order.append(f"re-armed {self.name}"))
                order.append(f"answered {self.name}")

            return hand_over

    done = threading.Event()

    class Last:
        def make(self) -> Callable[[], None]:
            return lambda: room.after_round(done.set)

    batch = woken(room, "rounds")
    # The user's share of the pool is busy until all four are in the batch: one pass.
    busy = threading.Event()
    room.owner_work.submit("rounds", lambda: busy.wait(10))
    for each in (Answering("a"), Answering("b"), Answering("c"), Last()):
        batch.add(each)
    busy.set()
    assert done.wait(10)
    assert order == ["answered a", "answered b", "answered c"] + [
        f"re-armed {name}" for name in "abc"
    ]
    room.after_round(lambda: order.append("at once"))  # outside a round
    assert order[-1] == "at once"


def test_a_deadline_between_an_answer_made_and_handed_over_waits_for_it(conn, room):
    """The batch makes every answer of its pass before it hands any over: a deadline in
    between must not answer that nothing came (the answer made has consumed the change:
    the client would never see it)."""
    poll, parked = _parked(room, _waiting(conn), "u", time.monotonic() + 60)
    poll.attach(parked)  # not in the room: its deadline is this test's call
    busy = threading.Event()
    room.owner_work.submit("u", lambda: busy.wait(10))  # the batch waits: made by hand here
    try:
        conn.execute("INSERT INTO t VALUES ('a', 2)")
        hand_over = poll.make()
        assert hand_over is not None
        assert poll.at_deadline() is None  # waits for the answer made
        assert parked.deadline == float("inf")
        hand_over()
    finally:
        busy.set()
    body = parked.wait().body
    assert b"event: rows" in body and b'"rows":[["a",2]]' in body, body


def test_a_long_polls_answer_is_the_retry_block_then_its_event(conn):
    """`encode_reply` makes a `rows` answer in one piece (its shared event copied once),
    the same bytes as the retry block before `reply_event`, whether or not the change's
    event was encoded already; the other kinds as well."""
    manager, session = conn.instance.subscriptions, conn.session()
    snapshot = manager.ask_now(session, QUERY, None)
    none = manager.ask_now(session, QUERY, snapshot.id)
    conn.execute("INSERT INTO t VALUES ('b', 2)")
    rows = manager.ask_now(session, QUERY, snapshot.id)
    assert (snapshot.kind, none.kind, rows.kind) == ("snapshot", "none", "rows")
    first = encode_reply(rows)  # its event not encoded before
    assert first.startswith(f"retry: 1000\n\nid: {rows.id}\nevent: rows\n".encode())
    for reply in (rows, snapshot, none):
        assert encode_reply(reply) == b"retry: 1000\n\n" + reply_event(reply)
    assert encode_reply(rows) == first
