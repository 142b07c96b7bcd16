"""Long-lived answers on the one waiting mechanism: many parts, no thread per stream.

The server here is the real one (`PooledWSGIServer` on a loopback port, real sockets); the
WSGI app is a small one of the test's own that answers with streaming `Parked` requests, so
that the mechanism is tested apart from any route.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.http.serving.server import STREAM_UNSENT_LIMIT
from refimpl.waiting.parked import Kind, Parked, Part, State
from refimpl.waiting.room import WaitingRoom
from tests.http.conftest import eventually, pooled_server

HEARTBEAT = 0.2


class StreamingApp:
    """`/stream`: parts on each poke, a heartbeat at each deadline, the end at the third
    poke; `/plain`: an answer at once. Every stream stays reachable for the test."""

    def __init__(self, part_bytes: int = 10) -> None:
        self.waiting_room = WaitingRoom(to_response)
        self.streams: list[Parked[Answer]] = []
        self.part_bytes = part_bytes

    def __call__(self, environ: dict, start_response):
        if environ["PATH_INFO"] == "/plain":
            return Answer(b"plain")(environ, start_response)
        pokes = [0]
        head = Answer(b"", 200, "text/event-stream")
        head.headers = [("Content-Type", "text/event-stream")]
        size = self.part_bytes
        parked: Parked[Answer]

        def attempt(_: int) -> Answer | Part[Answer] | None:
            pokes[0] += 1
            if pokes[0] >= 3:
                return _body(b"end\n")
            return Part(_body(b"p" * size + b"\n"))

        def heartbeat() -> Part[Answer]:
            parked.deadline = time.monotonic() + HEARTBEAT
            return Part(_body(b":\n"))

        parked = Parked(
            None,
            0,
            attempt,
            heartbeat,
            time.monotonic() + HEARTBEAT,
            lambda: None,
            kind=Kind.STREAM,
            at_close=lambda: _body(b"bye\n"),
        )
        parked.decide(Part(head))  # the head goes out at once
        self.waiting_room.park(parked)
        self.streams.append(parked)
        return parked(environ, start_response)


def _body(data: bytes) -> Answer:
    answer = Answer(data)
    answer.headers = []
    return answer


@pytest.fixture
def served() -> Iterator[tuple[StreamingApp, tuple[str, int]]]:
    app = StreamingApp()
    with pooled_server(app) as server:
        try:
            yield app, ("127.0.0.1", server.server_port)
        finally:
            app.waiting_room.close()


def _request(address: tuple[str, int], path: str) -> socket.socket:
    conn = socket.create_connection(address, timeout=10)
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return conn


def _read_until(conn: socket.socket, marker: bytes, seconds: float = 5.0) -> bytes:
    data = b""
    deadline = time.monotonic() + seconds
    while marker not in data and time.monotonic() < deadline:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_stream_sends_parts_heartbeats_and_its_end_then_serves_on(served) -> None:
    app, address = served
    conn = _request(address, "/stream")
    head = _read_until(conn, b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
    assert b":\n" in _read_until(conn, b":\n")  # a heartbeat, with nothing poked
    stream = app.streams[0]
    app.waiting_room.poke(stream)
    assert b"pppppppppp\n" in _read_until(conn, b"pppppppppp\n")
    # A stream is paced: pokes before its next fan-out round count once, so one at a time.
    app.waiting_room.poke(stream)
    assert b"pppppppppp\n" in _read_until(conn, b"pppppppppp\n")
    app.waiting_room.poke(stream)
    tail = _read_until(conn, b"0\r\n\r\n")
    assert b"end\n" in tail and tail.endswith(b"0\r\n\r\n")
    assert stream.state is State.ANSWERED
    conn.sendall(b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection is kept
    assert b"plain" in _read_until(conn, b"plain")
    conn.close()


def test_streams_hold_no_worker(served) -> None:
    app, address = served
    streams = [_request(address, "/stream") for _ in range(10)]  # two workers only
    assert eventually(lambda: len(app.streams) == 10)
    plain = _request(address, "/plain")
    assert b"plain" in _read_until(plain, b"plain")
    for conn in [*streams, plain]:
        conn.close()


def test_a_reader_that_stops_reading_is_dropped_in_bounded_memory() -> None:
    app = StreamingApp(part_bytes=256 * 1024)
    with pooled_server(app) as server:
        try:
            conn = _request(("127.0.0.1", server.server_port), "/stream")
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            assert eventually(lambda: len(app.streams) == 1)
            stream = app.streams[0]
            sent = 0
            # Parts keep coming while the client reads nothing: the server gives up on it once
            # more than its limit waits unsent, instead of buffering without end.
            while stream.state is State.WAITING and sent < 10 * STREAM_UNSENT_LIMIT:
                stream.decide(Part(_body(b"x" * 256 * 1024)))
                sent += 256 * 1024
            assert stream.state is State.DROPPED
            assert sent <= 4 * STREAM_UNSENT_LIMIT + 16 * 1024 * 1024  # kernel buffers aside
            plain = _request(("127.0.0.1", server.server_port), "/plain")
            assert b"plain" in _read_until(plain, b"plain")
            conn.close()
            plain.close()
        finally:
            app.waiting_room.close()


def test_the_stop_sends_a_streams_closing_words(served) -> None:
    app, address = served
    conn = _request(address, "/stream")
    assert eventually(lambda: len(app.streams) == 1)
    _read_until(conn, b"\r\n\r\n")
    app.waiting_room.close()
    tail = _read_until(conn, b"0\r\n\r\n")
    assert b"bye\n" in tail and tail.endswith(b"0\r\n\r\n")
    conn.close()
