"""A stream whose client stops reading while many rows commit: bounded memory, writers go on.

The client reads `ready`, then nothing while transactions of 100 changed rows each commit
(rows with a 400-byte text, so that what the stream owes the client is tens of MB in the
long run); the server stops reading ahead for that stream instead of buffering, its
resident memory stays within a bound, every commit is answered promptly, and the client
then reads every change, in order (or `reset`, had it fallen behind the kept log).

The short run (100 transactions) is the default; the long one (1,000 transactions, 100,000
rows) is marked `long`: `pytest -m long tests/http/test_stream_slow_reader.py`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.conftest import Server, running_server
from tests.http.stream_client import open_stream

ROWS = 100  # per transaction
PAD = "p" * 400
MEMORY_BOUND_MB = 40  # what the server's memory may grow by (a buffering server: > 50 MB)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with running_server(tmp_path / "data") as running:
        yield running


@pytest.mark.parametrize(
    "transactions", [100, pytest.param(1000, marks=pytest.mark.long)], ids=["short", "long"]
)
def test_a_reader_that_stops_costs_bounded_memory(server: Server, transactions: int) -> None:
    values = ", ".join(f"({n}, 0, '{PAD}')" for n in range(ROWS))
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT, pad STRING)")
    server.sql(f"INSERT INTO t VALUES {values}")
    resume: dict[str, Any] = {"last-event-id": "2"}  # not a Python name: given as a mapping
    stream = open_stream(server, read_timeout=60, **resume)
    assert stream.take(1)[0]["event"] == "ready"
    before = server.memory_kb() / 1024
    slowest = 0.0
    for n in range(1, transactions + 1):
        started = time.monotonic()
        server.sql(f"UPDATE t SET v = {n}")
        slowest = max(slowest, time.monotonic() - started)
    grown = server.memory_kb() / 1024 - before
    assert grown < MEMORY_BOUND_MB, f"the server grew by {grown:.1f} MB for a stalled reader"
    assert slowest < 5.0, f"a commit took {slowest:.2f} s while the reader stalled"
    seen = 0
    expected_v = 1
    while seen < transactions * ROWS:
        event = stream.next_event()
        assert event is not None, "the stream ended"
        if event["event"] == "reset":
            return  # fell behind the kept log: told so, never silently dropped
        assert event["event"] == "change", event
        assert event["data"]["row"]["v"] == expected_v
        seen += 1
        if seen % ROWS == 0:
            expected_v += 1
    stream.close()


def _read_changes(stream, count: int, into: list) -> None:
    while len(into) < count:
        event = stream.next_event()
        if event is None:
            return
        if event["event"] == "change":
            into.append((event["id"], event["data"]["row"]["v"]))


def _stalled_stream(server: Server) -> socket.socket:
    """A stream on a socket with a small receive buffer, so that it stalls soon unread."""
    host, port = server.url.split("://", 1)[1].rsplit(":", 1)
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect((host, int(port)))
    conn.settimeout(60)
    conn.sendall(
        f"GET /stream/changes HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {server.token}\r\n\r\n".encode()
    )
    return conn


def _changes_read(conn: socket.socket, count: int) -> list[tuple[str, Any]]:
    """Read `count` changes (id and `v`) from a stream's raw socket, chunks undone."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += conn.recv(65536)
    rest, body = raw.split(b"\r\n\r\n", 1)[1], b""
    changes: list[tuple[str, Any]] = []
    while len(changes) < count:
        line, _, after = rest.partition(b"\r\n")
        size = int(line, 16) if line else -1
        if 0 <= size and len(after) >= size + 2:
            body, rest = body + after[:size], after[size + 2 :]
            *blocks, body = body.split(b"\n\n")
            for block in blocks:
                fields = dict(f.split(b": ", 1) for f in block.split(b"\n") if b": " in f)
                if fields.get(b"event") == b"reset":
                    return changes  # fell behind the kept log: told so
                if fields.get(b"event") == b"change":
                    row = json.loads(fields[b"data"])["row"]
                    changes.append((fields[b"id"].decode(), row["v"]))
            continue
        data = conn.recv(65536)
        assert data, "the stream ended"
        rest += data
    return changes


def test_a_stalled_stream_among_streams_that_share_goes_on_by_itself(server: Server) -> None:
    """Streams of one view share each part; one stops reading: the others get every change
    at once, and the stalled one, once it reads again, every change once, in order."""
    transactions = 60
    values = ", ".join(f"({n}, 0, '{PAD}')" for n in range(ROWS))
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT, pad STRING)")
    server.sql(f"INSERT INTO t VALUES {values}")
    stalled = _stalled_stream(server)
    streams = [open_stream(server, read_timeout=60) for _ in range(2)]  # streams_per_token
    assert all(s.take(1)[0]["event"] == "ready" for s in streams)
    got: list[list] = [[] for _ in streams]
    readers = [
        threading.Thread(target=_read_changes, args=(s, transactions * ROWS, got[n]))
        for n, s in enumerate(streams)
    ]
    for reader in readers:
        reader.start()
    for n in range(1, transactions + 1):
        server.sql(f"UPDATE t SET v = {n}")
    for reader in readers:
        reader.join(60)
    expected = [v for v in range(1, transactions + 1) for _ in range(ROWS)]
    assert [v for _, v in got[0]] == expected and got[1] == got[0]
    late = _changes_read(stalled, transactions * ROWS)
    assert late == got[0][: len(late)] and (len(late) == len(got[0]) or late)
    stalled.close()
    for stream in streams:
        stream.close()
