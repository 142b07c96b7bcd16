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

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import Server, start_server
from tests.http.stream_client import open_stream

ROWS = 100  # per transaction
PAD = "p" * 400
MEMORY_BOUND_MB = 40  # what the server's memory may grow by (a buffering server: > 50 MB)


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "data")
    try:
        yield running
    finally:
        assert running.stop() == 0, running.log.read_text()[-3000:]


@pytest.mark.parametrize(
    "transactions", [100, pytest.param(1000, marks=pytest.mark.long)], ids=["short", "long"]
)
def test_a_reader_that_stops_costs_bounded_memory(server: Server, transactions: int) -> None:
    values = ", ".join(f"({n}, 0, '{PAD}')" for n in range(ROWS))
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT, pad STRING)")
    server.sql(f"INSERT INTO t VALUES {values}")
    stream = open_stream(server, read_timeout=60, **{"last-event-id": "2"})
    assert stream.take(1)[0]["event"] == "ready"
    before = resident_mb(server.process.pid)
    slowest = 0.0
    for n in range(1, transactions + 1):
        started = time.monotonic()
        server.sql(f"UPDATE t SET v = {n}")
        slowest = max(slowest, time.monotonic() - started)
    grown = resident_mb(server.process.pid) - before
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
