"""Large parts many streams share go to each socket from one memory file (`part_files`).

The server is the real one (`PooledWSGIServer` on loopback, real sockets), its streams those
of `the app of `streaming_app`: the test hands a part to all of them as a fan-out round does
(`WaitingRoom.send_shared`), and checks what each client reads: every byte once, in order,
also for a client that takes less than the part and reads the rest later, and after the
stream's end the connection answers its next request as before.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from typing import Any

import pytest

from refimpl.http.encode import Answer
from refimpl.http.serving import part_files
from refimpl.http.serving.part_files import ZERO_COPY_BYTES, PartFile, blocking
from refimpl.waiting.parked import Parked
from tests.http.parked_apps import serving
from tests.http.streaming_app import StreamingApp, part_body, read_until, request
from tests.waits import eventually


def _read_exactly(conn: socket.socket, count: int, seconds: float = 10.0) -> bytes:
    data = b""
    deadline = time.monotonic() + seconds
    while len(data) < count and time.monotonic() < deadline:
        chunk = conn.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


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


def test_without_a_memory_file_a_part_is_sent_as_bytes(monkeypatch) -> None:
    def refused(name: str) -> int:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "memfd_create", refused)
    assert PartFile.of(b"x" * ZERO_COPY_BYTES) is None


def test_a_part_file_sends_what_the_socket_takes_and_no_more() -> None:
    assert PartFile.of(b"x" * (ZERO_COPY_BYTES - 1)) is None  # small: sent as bytes
    data = bytes(range(256)) * (4 * ZERO_COPY_BYTES // 256)
    part = PartFile.of(data)
    assert part is not None
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    try:
        sent = part.send(ours)
        assert 0 < sent < len(data)  # the socket took part of it, without blocking
        assert ours.gettimeout() == 0.0
        with pytest.raises(BlockingIOError):
            part.send(ours)  # full: nothing taken, the caller keeps the rest
        assert _read_exactly(theirs, sent) == data[:sent]
        blocking(ours)
        assert ours.gettimeout() is None
    finally:
        part.close()
        ours.close()
        theirs.close()


def test_a_large_shared_part_reaches_every_stream_once_in_order(monkeypatch) -> None:
    sent_from_file = []
    send = PartFile.send

    def counted(self: PartFile, sock: socket.socket) -> int:
        sent_from_file.append(sock)
        return send(self, sock)

    monkeypatch.setattr(part_files.PartFile, "send", counted)
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
        bodies = [os.urandom(3 * ZERO_COPY_BYTES), os.urandom(ZERO_COPY_BYTES)]
        backlogged: list[object] = []
        for body in bodies:
            app.waiting_room.send_shared(outlets, part_body(body), backlogged.append)
        assert len(sent_from_file) >= 4  # a part from the file for each, at least
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


def test_a_small_shared_part_is_sent_as_bytes(monkeypatch) -> None:
    made = []
    monkeypatch.setattr(part_files.PartFile, "__init__", lambda self, data: made.append(data))
    with serving(StreamingApp()) as (app, address):
        conn = request(address, "/stream")
        assert read_until(conn, b"\r\n\r\n").startswith(b"HTTP/1.1 200")
        assert eventually(lambda: len(app.streams) == 1)
        outlet = app.streams[0].outlet
        assert eventually(lambda: outlet.stream_started)  # type: ignore[attr-defined]
        app.waiting_room.send_shared([outlet], part_body(b"small part\n"), lambda _: None)
        assert b"small part\n" in read_until(conn, b"small part\n")
        assert made == []
        assert outlet.connection.gettimeout() is None  # type: ignore[attr-defined]
        conn.close()
