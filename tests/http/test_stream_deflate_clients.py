"""Compressed event streams (`stream_deflate`) beyond the shared case: a stream whose client
stops reading while the others read on (its socket full, the shared parts backlogged, then
its own parts), one that resumes from an event id, and one that connects late (another
group), each get the plain stream's events, and the zlib stream of each ends whole (its
checksum over every part checked) when the server shuts down."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import Server, deflating_server
from tests.http.stream_client import RawStream

HEARTBEAT = 0.3


class SmallWindowStream(RawStream):
    """A compressed stream whose socket takes little at a time (its receive buffer made
    small before it connects): a client that stops reading fills it at once."""

    def __init__(self, server: Server) -> None:
        real = socket.create_connection

        def small(address: tuple[str, int], timeout: float) -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(timeout)
            sock.connect(address)
            return sock

        socket.create_connection = small  # type: ignore[assignment]
        try:
            super().__init__(server, "deflate")
        finally:
            socket.create_connection = real


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with deflating_server(tmp_path, HEARTBEAT, "stream_buffer_kb = 16\n") as running:
        yield running


def _insert(server: Server, first: int, count: int, width: int) -> None:
    # Text that compresses little (hex digits of a random number), so that the compressed
    # parts still fill a socket that is not read.
    rng = random.Random(first)
    values = ", ".join(
        f"({n}, '{n:06d}{rng.getrandbits(4 * width):0{width}x}')"
        for n in range(first, first + count)
    )
    server.sql(f"INSERT INTO t VALUES {values}")


def test_backlogged_resumed_and_late_compressed_streams_end_whole(server: Server) -> None:
    plain = RawStream(server, None)
    reader = RawStream(server, "deflate")
    slow = SmallWindowStream(server)
    for stream in (plain, reader, slow):
        assert stream.deflated is (stream is not plain)
        stream.read_until(b"event: ready")
    _insert(server, 0, 5, 10)
    for stream in (plain, reader, slow):
        stream.read_until(b'"id":4,')
    resume_at = [b for b in plain.text.split(b"\n\n") if b.startswith(b"id: ")][-1]
    event_id = resume_at.split(b"\n")[0].removeprefix(b"id: ").decode()
    # The slow client reads nothing while commits of some megabytes go by: its socket
    # fills (measured: 2 MB waited in the server's send queue), its shared parts are
    # backlogged, and it goes on with parts of its own.
    for round_ in range(12):
        _insert(server, 1000 + round_ * 200, 200, 1500)
        plain.read_until(f'"id":{1000 + round_ * 200 + 199},'.encode())
        reader.read_until(f'"id":{1000 + round_ * 200 + 199},'.encode())
    late = RawStream(server, "deflate")  # another position: another group
    late.read_until(b"event: ready")
    resumed = RawStream(server, "deflate", f"&last-event-id={event_id}")
    _insert(server, 5000, 50, 100)
    time.sleep(HEARTBEAT * 2)
    for stream in (plain, reader, slow, late, resumed):
        stream.read_until(b'"id":5049,')
    changes = [e for e in plain.events() if b"event: change" in e]
    assert [e for e in reader.events() if b"event: change" in e] == changes
    assert [e for e in slow.events() if b"event: change" in e] == changes
    after = changes.index(next(e for e in changes if b'"id":1000,' in e))
    assert [e for e in resumed.events() if b"event: change" in e] == changes[after:]
    assert [e for e in late.events() if b"event: change" in e] == changes[-50:]
    assert server.stop() == 0
    for stream in (reader, slow, late, resumed):
        for chunk in stream.chunks():
            stream.text += chunk
        assert b": the stream ended: the server is shutting down" in stream.text
        assert stream.inflate.eof and not stream.inflate.unused_data
