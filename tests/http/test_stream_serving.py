"""Long-lived answers on the one waiting mechanism: many parts, no thread per stream.

The server here is the real one (`PooledWSGIServer` on a loopback port, real sockets); the
WSGI app is a small one that answers with streaming `Parked` requests (`streaming_app`), so
that the mechanism is tested apart from any route.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from refimpl.http.serving.server import STREAM_UNSENT_LIMIT
from refimpl.waiting.parked import Part, State
from tests.http.parked_apps import serving
from tests.http.streaming_app import StreamingApp, part_body, read_until, request
from tests.waits import eventually


@pytest.fixture
def served() -> Iterator[tuple[StreamingApp, tuple[str, int]]]:
    with serving(StreamingApp()) as served:
        yield served


def test_a_stream_sends_parts_heartbeats_and_its_end_then_serves_on(served) -> None:
    app, address = served
    conn = request(address, "/stream")
    head = read_until(conn, b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
    assert b":\n" in read_until(conn, b":\n")  # a heartbeat, with nothing poked
    stream = app.streams[0]
    app.waiting_room.poke(stream)
    assert b"pppppppppp\n" in read_until(conn, b"pppppppppp\n")
    # A stream is paced: pokes before its next fan-out round count once, so one at a time.
    app.waiting_room.poke(stream)
    assert b"pppppppppp\n" in read_until(conn, b"pppppppppp\n")
    app.waiting_room.poke(stream)
    tail = read_until(conn, b"0\r\n\r\n")
    assert b"end\n" in tail and tail.endswith(b"0\r\n\r\n")
    assert stream.state is State.ANSWERED
    conn.sendall(b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection is kept
    assert b"plain" in read_until(conn, b"plain")
    conn.close()


def test_streams_hold_no_worker(served) -> None:
    app, address = served
    streams = [request(address, "/stream") for _ in range(10)]  # two workers only
    assert eventually(lambda: len(app.streams) == 10)
    plain = request(address, "/plain")
    assert b"plain" in read_until(plain, b"plain")
    for conn in [*streams, plain]:
        conn.close()


def test_a_reader_that_stops_reading_is_dropped_in_bounded_memory() -> None:
    with serving(StreamingApp(part_bytes=256 * 1024)) as (app, address):
        conn = request(address, "/stream")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        assert eventually(lambda: len(app.streams) == 1)
        stream = app.streams[0]
        sent = 0
        # Parts keep coming while the client reads nothing: the server gives up on it once
        # more than its limit waits unsent, instead of buffering without end.
        while stream.state is State.WAITING and sent < 10 * STREAM_UNSENT_LIMIT:
            stream.decide(Part(part_body(b"x" * 256 * 1024)))
            sent += 256 * 1024
        assert stream.state is State.DROPPED
        assert sent <= 4 * STREAM_UNSENT_LIMIT + 16 * 1024 * 1024  # kernel buffers aside
        plain = request(address, "/plain")
        assert b"plain" in read_until(plain, b"plain")
        conn.close()
        plain.close()


def test_the_stop_sends_a_streams_closing_words(served) -> None:
    app, address = served
    conn = request(address, "/stream")
    assert eventually(lambda: len(app.streams) == 1)
    read_until(conn, b"\r\n\r\n")
    app.waiting_room.close()
    tail = read_until(conn, b"0\r\n\r\n")
    assert b"bye\n" in tail and tail.endswith(b"0\r\n\r\n")
    conn.close()
