"""A large part many streams share (`PooledWSGIServer._send_shared`) reaches every stream once
and in order, also a stream whose client takes less than the part and reads the rest later.

The server is the real one (`PooledWSGIServer` on loopback, real sockets), its streams those
of the app of `streaming_app`: the test hands a part to all of them as a fan-out round does
(`WaitingRoom.send_shared`), and checks what each client reads; after the stream's end the
connection answers its next request as before.
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any

from refimpl.http.encode import Answer
from refimpl.waiting.parked import Parked
from tests.http.parked_apps import serving
from tests.http.streaming_app import StreamingApp, part_body, read_until, request
from tests.waits import eventually

PART_BYTES = 32 * 1024  # a part that carries many commits


def _chunks(data: bytes) -> list[bytes]:
    """The chunks of a chunked body (`data` from its first chunk), heartbeats left out."""
    found = []
    while data:
        line, _, data = data.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            break
        found.append(data[:size])
        assert data[size : size + 2] == b"\r\n"
        data = data[size + 2 :]
    return [chunk for chunk in found if chunk != b":\n"]


def _poked(app: StreamingApp, stream: Parked[Answer]) -> bool:
    """Poke `stream`; whether it has ended."""
    app.waiting_room.poke(stream)
    return stream.finished


def test_a_large_shared_part_reaches_every_stream_once_in_order() -> None:
    with serving(StreamingApp()) as (app, address):
        clients = [request(address, "/stream") for _ in range(4)]
        heads = [read_until(conn, b"\r\n\r\n") for conn in clients]
        assert all(head.startswith(b"HTTP/1.1 200") for head in heads)
        assert eventually(lambda: len(app.streams) == 4)
        outlets: list[Any] = [stream.outlet for stream in app.streams]
        assert eventually(lambda: all(o.stream_started for o in outlets))
        by_outlet = {
            id(o): conn
            for o in outlets
            for conn in clients
            if conn.getpeername() == o.connection.getsockname()
            and conn.getsockname() == o.connection.getpeername()
        }
        clients = [by_outlet[id(o)] for o in outlets]
        # The first takes little: the part does not fit, the rest waits in the server.
        outlets[0].connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        bodies = [os.urandom(3 * PART_BYTES), os.urandom(PART_BYTES)]
        backlogged: list[object] = []
        for body in bodies:
            app.waiting_room.send_shared(outlets, part_body(body), backlogged.append)
        assert outlets[0] in backlogged
        # The streams end (their parts, then the last one); each connection then
        # serves its next request, blocking again.
        for stream in app.streams:  # the third poke a stream counts ends it
            assert eventually(functools.partial(_poked, app, stream))
        for conn in clients:
            got = read_until(conn, b"end\n\r\n0\r\n\r\n", seconds=10)
            assert _chunks(got) == [*bodies, b"p" * 10 + b"\n", b"p" * 10 + b"\n", b"end\n"]
        assert eventually(lambda: all(o.stream is None for o in outlets))
        assert all(o.connection.gettimeout() is None for o in outlets)
        for conn in clients:
            conn.sendall(b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"plain" in read_until(conn, b"plain")
            conn.close()
