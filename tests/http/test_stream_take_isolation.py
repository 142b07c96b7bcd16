"""A stream's long take holds no other stream, even when its heartbeat falls due meanwhile
(spec: stream, a waiter's own work; issue: the event-stream stall).

A READ user's stream has a `where=` that is slow in single C calls: a regular expression of
1,000 optional characters (RE2's automaton gives up on it and steps through its 9,000 states
at every character of a text it does not match: about 4 s for one 300 KB text, in one call
that no deadline stops once started). The statement timeout is long, so the take of three
such rows runs for many seconds, and the
heartbeat is short, so the waiting room's thread sends that stream's heartbeats while its
take runs. Meanwhile another user's stream must get each of its events within a few
seconds, exactly once, and the slow stream gets its own event, once, when its take is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.conftest import Server, running_server
from tests.http.stream_client import EventReader, open_stream

SLOW_TEXT = "a" * 300_000  # no `b`: the expression is tried at every place, all in vain
SLOW_ROWS = 3  # in one statement, within max_sql_bytes
WHERE = "body ~ '(?:.?){1000}b'"
LIVELY_SECONDS = 3.0  # a victim's event within this while the hostile take runs
TICKS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("take-isolation") / "data"
    data.mkdir()
    # A long statement timeout: the hostile take is not cut short. A short heartbeat: one
    # falls due (and is sent from the room's thread) many times during the take.
    (data / "kdb.conf").write_text("statement_timeout_ms = 120000\nstream_heartbeat_s = 0.2\n")
    with running_server(data) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        running.sql("CREATE USER hostile")
        running.sql("GRANT READ ON DATABASE demo TO hostile")
        yield running


class _Arrivals:
    """Reads a stream in a thread of its own: each event with the time it came."""

    def __init__(self, reader: EventReader) -> None:
        self.reader = reader
        self.events: list[tuple[float, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while (event := self.reader.next_event()) is not None:
                self.events.append((time.monotonic(), event))
        except Exception:  # noqa: BLE001 - the stream was closed by the test, or timed out
            return

    def changes(self) -> list[tuple[float, dict[str, Any]]]:
        return [(at, e) for at, e in self.events if e["event"] == "change"]

    def wait_changes(self, count: int, seconds: float) -> list[tuple[float, dict[str, Any]]]:
        deadline = time.monotonic() + seconds
        while len(self.changes()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.changes()


def test_a_heartbeat_during_a_long_filtered_take_holds_no_other_stream(server: Server) -> None:
    hostile_token = server.new_token("hostile")
    victim = open_stream(server, table="ticks", read_timeout=60)
    assert victim.take(1)[0]["event"] == "ready"
    hostile_reader = open_stream(
        server, table="docs", where=WHERE, token=hostile_token, read_timeout=120
    )
    assert hostile_reader.status == 200
    assert hostile_reader.take(1)[0]["event"] == "ready"
    hostile = _Arrivals(hostile_reader)
    arrivals = _Arrivals(victim)

    # Slow rows, then one the filter matches at once: the hostile stream's one event comes
    # only after its take went through every slow row.
    slow = range(1, SLOW_ROWS + 1)
    server.sql("INSERT INTO docs VALUES " + ", ".join(f"({i}, '{SLOW_TEXT}')" for i in slow))
    server.sql(f"INSERT INTO docs VALUES ({SLOW_ROWS + 1}, 'b')")
    time.sleep(1.0)  # its take runs, and heartbeats fall due

    for tick in range(1, TICKS + 1):
        started = time.monotonic()
        server.sql(f"INSERT INTO ticks VALUES ({tick}, {tick})")
        got = arrivals.wait_changes(tick, LIVELY_SECONDS + 2)
        assert len(got) >= tick, f"tick {tick} did not come; the victim got {got}"
        assert got[tick - 1][0] - started < LIVELY_SECONDS, got
    # What was asserted happened while the hostile take ran (else this test proves nothing).
    assert hostile.changes() == [], "the hostile take ended before the victim's ticks"

    # The hostile stream gets its one event, once, when its take is done.
    found = hostile.wait_changes(1, 110)
    assert [e["data"]["row"]["id"] for _, e in found] == [SLOW_ROWS + 1]
    assert hostile_reader.status == 200

    # Exactly once each: one more tick, and the victim's changes are every tick in order.
    server.sql(f"INSERT INTO ticks VALUES ({TICKS + 1}, 0)")
    got = arrivals.wait_changes(TICKS + 1, 10)
    time.sleep(0.5)  # a repeated event would come by now
    ids = [e["data"]["row"]["id"] for _, e in arrivals.changes()]
    assert ids == list(range(1, TICKS + 2))
    assert len(hostile.changes()) == 1
    victim.close()
    hostile_reader.close()
    assert "Traceback" not in server.log.read_text()
