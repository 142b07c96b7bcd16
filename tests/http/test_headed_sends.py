"""Parts that end alike (`WaitingRoom.send_headed`, a live query's streams woken together):
each stream's client reads its own head then the shared body, as one chunk of its own, as a
part of its own would be; a stream is told `drained` once its part went out whole, a
reader that does not read holds no other stream, and a stream that ended gets nothing more.

The server is the real one (`PooledWSGIServer` on a loopback port, real sockets), with a
small app of the test's own that parks a live query's streams."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import WaitingRoom
from tests.http.parked_apps import held, serving
from tests.waits import eventually


def _body(data: bytes) -> Answer:
    answer = Answer(data, 200, "text/event-stream")
    answer.headers = []
    return answer


class LiveApp:
    """Every request is a live query's stream, parked; its `drained` calls are counted."""

    def __init__(self) -> None:
        self.waiting_room = WaitingRoom(to_response)
        self.streams: list[Parked[Answer]] = []
        self.drained: dict[int, int] = {}

    def __call__(self, environ: dict, start_response):
        number = len(self.streams)
        self.drained[number] = 0

        def drained() -> None:
            self.drained[number] += 1

        parked = held(Kind.LIVE_STREAM, at_close=lambda: _body(b"bye\n"), on_drained=drained)
        head = _body(b"head\n")
        head.headers = [("Content-Type", "text/event-stream")]
        parked.decide(Part(head))
        self.waiting_room.park(parked)
        self.streams.append(parked)
        return parked(environ, start_response)


@pytest.fixture
def served() -> Iterator[tuple[LiveApp, tuple[str, int]]]:
    with serving(LiveApp()) as served:
        yield served


def _open(app: LiveApp, address: tuple[str, int], rcvbuf: int | None = None) -> socket.socket:
    conn = socket.socket()
    if rcvbuf is not None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    conn.settimeout(10)
    conn.connect(address)
    count = len(app.streams)
    conn.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\n\r\n")
    # Parked, and its head sent (told `drained`, once): parts may be shared now.
    assert eventually(lambda: len(app.streams) > count and app.drained[count] == 1)
    return conn


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, data
        data += chunk
    return data


def _head_of_answer(conn: socket.socket) -> bytes:
    data = b""
    while b"head\n\r\n" not in data:
        chunk = conn.recv(1)
        assert chunk
        data += chunk
    return data


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_each_stream_reads_its_head_then_the_shared_body(served) -> None:
    app, address = served
    conns = [_open(app, address) for _ in range(3)]
    for conn in conns:
        assert _head_of_answer(conn).startswith(b"HTTP/1.1 200")
    heads = [b"id: s1.2\n", b"id: s22.2\n", b"id: s333.2\n"]
    body = b"event: rows\ndata: {}\n\n"
    assert app.waiting_room.sends_headed
    parts = [(parked.outlet, head) for parked, head in zip(app.streams, heads, strict=True)]
    app.waiting_room.send_headed(parts, body)
    for conn, head in zip(conns, heads, strict=True):
        expected = _chunk(head + body)
        assert _read_exactly(conn, len(expected)) == expected
    assert eventually(lambda: list(app.drained.values()) == [2, 2, 2]), app.drained
    for conn in conns:
        conn.close()


def test_a_reader_that_does_not_read_holds_no_other_and_gets_its_part_whole_later(
    served,
) -> None:
    app, address = served
    slow = _open(app, address, rcvbuf=4096)
    quick = _open(app, address)
    _head_of_answer(quick)
    # The server's end of the slow client's socket takes little too: most of its part waits.
    outlet = app.streams[0].outlet
    outlet.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    body = b"x" * (768 * 1024)  # more than the sockets take, less than the unsent limit
    parts = [(app.streams[0].outlet, b"id: slow\n"), (app.streams[1].outlet, b"id: quick\n")]
    app.waiting_room.send_headed(parts, body)
    expected = _chunk(b"id: quick\n" + body)
    assert _read_exactly(quick, len(expected)) == expected
    assert eventually(lambda: app.drained[1] == 2)
    assert app.drained[0] == 1  # the slow client took only the head yet
    _head_of_answer(slow)
    expected = _chunk(b"id: slow\n" + body)
    assert _read_exactly(slow, len(expected)) == expected
    # Told once its part went out whole (by the worker that sent the rest, if any).
    assert eventually(lambda: app.drained[0] == 2), app.drained
    slow.close()
    quick.close()


def test_a_stream_that_ended_gets_no_part_after_its_end(served) -> None:
    app, address = served
    conn = _open(app, address)
    _head_of_answer(conn)
    parked = app.streams[0]
    outlet = parked.outlet
    parked.decide(_body(b"end\n"))
    assert _read_exactly(conn, len(_chunk(b"end\n")) + 5) == _chunk(b"end\n") + b"0\r\n\r\n"
    app.waiting_room.send_headed([(outlet, b"id: late\n")], b"event: rows\n\n")
    conn.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection serves on
    assert _head_of_answer(conn).startswith(b"HTTP/1.1 200")  # nothing came between
    assert app.drained[0] == 1  # its head's only
    conn.close()
