"""A long poll's wait ends when nothing will take it again, and no wake-up is lost to a
deadline (refimpl.http.endpoints.subscribe_route's `_Poll`, with a real engine and a real
waiting room):

- a wait kept for the re-poll (`_Poll.rearm`) whose connection closes as its answer goes
  out (a failed send closes it inside the hand-over) leaves the wake board then, not at the
  next commit that touches it;
- a request that has no connection to keep its poll (no `RouteMemo`) keeps no wait;
- a deadline that comes between `park` and `attach`, after a commit woke the poll, waits
  for the answer of that commit instead of answering that nothing came;
- a request whose deadline came during its re-run leaves the room once that re-run answers.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from werkzeug.test import EnvironBuilder

import refimpl
from refimpl.engine.access import ADMIN
from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.http.app import App, AppOptions
from refimpl.http.encode import Answer
from refimpl.http.endpoints.subscribe_route import _Poll, woken
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom
from tests.waits import eventually

QUERY = "SUBSCRIBE SELECT s, count(*) AS n FROM t GROUP BY s ORDER BY s"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path / "data")
    connection.execute("CREATE TABLE t (s STRING, v INT)")
    connection.execute("INSERT INTO t VALUES ('a', 1)")
    yield connection
    connection.close()


def _waiting(conn: refimpl.Connection) -> LiveWait:
    manager = conn.instance.subscriptions
    session = conn.session()
    snapshot = manager.ask_now(session, QUERY, None)
    step = manager.ask(session, QUERY, snapshot.id)
    assert isinstance(step, LiveWait)
    return step


def _poll(room: WaitingRoom, step: LiveWait) -> tuple[_Poll, Parked[Answer]]:
    """A poll on the wake board and its request (parked by the test when it says so)."""
    poll = _Poll(step, woken(room, "u"), contextlib.nullcontext)
    step.watch(poll)
    parked: Parked[Answer] = Parked(
        None,
        0,
        poll.attempt,
        poll.at_deadline,
        time.monotonic() + 60,
        lambda: None,
        kind=Kind.LIVE,
    )
    return poll, parked


def test_a_kept_wait_whose_connection_closes_as_its_answer_goes_out_ends(conn, room) -> None:
    step = _waiting(conn)
    poll, parked = _poll(room, step)
    room.park(parked)
    poll.attach(parked)
    # The server's send failed: it closes the connection in the hand-over itself
    # (`Connection.close`, whose `_Kept.let_go` forgets the poll).
    parked.on_ready(lambda _answer: poll.forget())
    conn.execute("INSERT INTO t VALUES ('a', 2)")
    assert b"event: rows" in parked.wait().body
    assert eventually(lambda: not step.holds()), "the wait stayed on the wake board"
    assert conn.instance.subscriptions.stats()["waiting"] == 0


def test_a_deadline_between_park_and_attach_waits_for_an_earlier_wake_up(conn, room) -> None:
    poll, parked = _poll(room, _waiting(conn))
    conn.execute("INSERT INTO t VALUES ('a', 2)")  # woken before the route attached it
    assert poll.at_deadline() is None  # the room's deadline, before `attach`
    poll.attach(parked)
    assert parked.deadline == math.inf  # the re-run answers, not the deadline
    body = parked.wait().body
    assert b"event: rows" in body and b'"rows":[["a",2]]' in body, body


def test_a_deadline_after_attach_answers_nothing_came_when_nothing_did(conn, room) -> None:
    poll, parked = _poll(room, _waiting(conn))
    poll.attach(parked)
    answer = poll.at_deadline()
    assert answer is not None and b"event:" not in answer.body  # its id to ask again with


def test_a_deadline_during_the_re_run_leaves_the_room_with_its_answer(conn, room) -> None:
    # Its deadline comes while the re-run a commit queued runs (`at_deadline` takes it off):
    # once that re-run answers, the request is parked no more.
    step = _waiting(conn)
    running, go_on = threading.Event(), threading.Event()
    attempt = step.attempt

    def held(*args: object) -> object:
        running.set()
        assert go_on.wait(30)
        return attempt(*args)  # type: ignore[arg-type]

    poll, _ = _poll(room, step)
    step.attempt = held  # type: ignore[method-assign,assignment]
    parked: Parked[Answer] = Parked(
        None,
        0,
        poll.attempt,
        poll.at_deadline,
        time.monotonic() + 0.2,
        lambda: None,
        kind=Kind.LIVE,
    )
    room.park(parked)
    poll.attach(parked)
    conn.execute("INSERT INTO t VALUES ('a', 2)")
    assert running.wait(30)
    assert eventually(lambda: parked.deadline == math.inf)  # the room's deadline came
    go_on.set()
    assert b"event: rows" in parked.wait().body
    assert eventually(lambda: room.parked_count() == 0), "answered, and still parked"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    instance = Instance.open(tmp_path / "data", EngineOptions())
    served = App(instance, AppOptions(dev=True))
    session = instance.session("demo", ADMIN)
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    session.close()
    try:
        yield served
    finally:
        served.begin_shutdown()
        instance.close()


def _ask(app: App, **params: str) -> bytes:
    """A request of a connection that keeps nothing for its repeats (no `RouteMemo`)."""
    environ = EnvironBuilder(
        path="/api/subscribe",
        query_string={"query": "SUBSCRIBE SELECT id FROM t", **params},
        headers=[("Host", "localhost")],
    ).get_environ()

    def start(status: str, *_: object) -> Callable[[bytes], None]:
        assert status.startswith("200"), status
        return lambda _data: None

    return b"".join(app(environ, start))


def test_a_poll_with_no_connection_to_keep_it_keeps_no_wait(app: App) -> None:
    snapshot = _ask(app, wait="0")
    asked = next(line for line in snapshot.split(b"\n") if line.startswith(b"id: "))[4:]
    answered: list[bytes] = []
    thread = threading.Thread(target=lambda: answered.append(_ask(app, id=asked.decode())))
    thread.start()
    assert eventually(lambda: app.instance.subscriptions.stats()["waiting"] == 1)
    session = app.instance.session("demo", ADMIN)
    session.execute("INSERT INTO t VALUES (1)")
    session.close()
    thread.join(60)
    assert b"event: rows" in answered[0]
    # Nothing takes it again, nor lets it go when the connection closes: it ends now.
    assert app.instance.subscriptions.stats()["waiting"] == 0
