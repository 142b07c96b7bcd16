"""A connection answered in a round of woken long polls (the owner pool's: its round state's
`answers_next`): its next request, when the client sent it whole by the round's end and it
repeats the one answered but for its id, is served by the round's thread; any other
request, one not there yet, or a round that does not answer next requests (the room's own)
leaves it to a worker, as before.

The server is the real one (`PooledWSGIServer` on a loopback port, real sockets), with a
small app of the test's own that parks every request and notes the thread that served it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom
from tests.http.parked_apps import held, serving
from tests.waits import eventually


class PollApp:
    """Every request is a long poll, parked until the test decides it."""

    def __init__(self) -> None:
        self.waiting_room = WaitingRoom(to_response)
        self.polls: list[Parked[Answer]] = []
        self.threads: list[threading.Thread] = []  # that served each request, in order
        self.targets: list[str] = []

    def __call__(self, environ: dict, start_response):
        parked = held(Kind.LIVE, at_close=lambda: Answer(b"closed"))
        self.waiting_room.park(parked)
        self.threads.append(threading.current_thread())
        self.targets.append(environ["REQUEST_URI"])
        self.polls.append(parked)
        return parked(environ, start_response)


@pytest.fixture
def served() -> Iterator[tuple[PollApp, tuple[str, int]]]:
    with serving(PollApp()) as served:
        yield served


def _poll(version: int, path: str = "/poll") -> bytes:
    return f"GET {path}?q=x&id=s.{version}&wait=5 HTTP/1.1\r\nHost: t\r\n\r\n".encode()


def _answer(conn: socket.socket, body: bytes) -> None:
    """Read one whole answer ending in `body`."""
    data = b""
    while not data.endswith(body):
        more = conn.recv(65536)
        assert more, data
        data += more
    assert data.startswith(b"HTTP/1.1 200 "), data


def _answered_in_round(
    app: PollApp, conn: socket.socket, answers_next: bool, then: Callable[[], None]
) -> None:
    """The first poll answered in a round run by this thread (`answers_next` as the round
    says), its client sending what `then` sends before the round's end."""
    state = app.waiting_room.round_state
    pending: list[Callable[[], None]] = []
    state.pending, state.answers_next = pending, answers_next
    try:
        app.polls[0].decide(Answer(b"one"))
    finally:
        state.pending = state.answers_next = None
    _answer(conn, b"one")
    then()
    for action in pending:
        action()


def _open(app: PollApp, address: tuple[str, int]) -> socket.socket:
    conn = socket.create_connection(address, timeout=10)
    conn.sendall(_poll(1))
    assert eventually(lambda: len(app.polls) == 1)
    assert app.threads[0] is not threading.current_thread()  # a worker's
    return conn


def test_a_repeat_sent_before_the_rounds_end_is_served_by_its_thread(
    served: tuple[PollApp, tuple[str, int]],
) -> None:
    app, address = served
    with _open(app, address) as conn:
        _answered_in_round(app, conn, True, lambda: conn.sendall(_poll(2)))
        assert len(app.polls) == 2  # parked already, by the round's thread
        assert app.threads[1] is threading.current_thread()
        assert app.targets[1] == "/poll?q=x&id=s.2&wait=5"
        # Its answer goes out as any parked one's, and the next goes to a worker.
        app.polls[1].decide(Answer(b"two"))
        _answer(conn, b"two")
        conn.sendall(_poll(3))
        assert eventually(lambda: len(app.polls) == 3)
        assert app.threads[2] is not threading.current_thread()


@pytest.mark.parametrize(
    "answers_next, sent",
    [
        (True, _poll(2, "/other")),  # not a repeat: any request, maybe a costly one
        (True, _poll(2) + _poll(3)),  # more than the repeat: parsed, a worker's
        (True, b""),  # nothing yet: the connection waits for it in the set
        (False, _poll(2)),  # a round of the room's own (a deadline's): never its work
    ],
    ids=["another request", "pipelined", "none yet", "the room's round"],
)
def test_anything_else_is_served_by_a_worker(
    served: tuple[PollApp, tuple[str, int]], answers_next: bool, sent: bytes
) -> None:
    app, address = served
    with _open(app, address) as conn:
        _answered_in_round(app, conn, answers_next, lambda: conn.sendall(sent))
        if not sent:
            time.sleep(0.05)
            conn.sendall(_poll(2))
        assert eventually(lambda: len(app.polls) == 2)
        assert app.threads[1] is not threading.current_thread()


def test_a_repeat_sent_after_its_first_look_is_served_by_a_second_one(
    served: tuple[PollApp, tuple[str, int]],
) -> None:
    """A connection whose re-poll had not come at its first look is looked at once more,
    after the round's other connections (as `Woken._run` runs what they leave for later):
    a re-poll sent meanwhile is served by the round's thread, not a worker."""
    app, address = served
    with (
        socket.create_connection(address, timeout=10) as a,
        socket.create_connection(address, timeout=10) as b,
    ):
        a.sendall(_poll(1))
        assert eventually(lambda: len(app.polls) == 1)
        b.sendall(_poll(1))
        assert eventually(lambda: len(app.polls) == 2)
        state = app.waiting_room.round_state
        pending: list[Callable[[], None]] = []
        state.pending, state.answers_next = pending, True
        try:
            app.polls[0].decide(Answer(b"one"))
            app.polls[1].decide(Answer(b"two"))
        finally:
            state.answers_next = None
        _answer(a, b"one")
        _answer(b, b"two")
        a.sendall(_poll(2))  # before its first look; b's only after its own
        later: list[Callable[[], None]] = []
        state.pending = later
        try:
            for action in pending:
                action()
            assert len(app.polls) == 3  # a's, served at its first look
            b.sendall(_poll(2))
            for action in later:
                action()
        finally:
            state.pending = None
        assert len(app.polls) == 4 and app.threads[3] is threading.current_thread()
        assert app.targets[3] == "/poll?q=x&id=s.2&wait=5"
