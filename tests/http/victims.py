"""A victim's ticks beside another user's costly work, for the isolation tests: one
commit at a time to the victim's `ticks` table while the work runs, each to reach the
victim's stream, and `/health` to answer, within a liveness bound."""

from __future__ import annotations

import threading
import time

from tests.http.conftest import Server
from tests.http.stream_client import EventReader

TICK_SECONDS = 0.3  # between one tick's event and the next tick's commit


def tick_while(
    server: Server, victim: EventReader, work: threading.Thread, lively_s: float
) -> list[float]:
    """Commits `INSERT INTO ticks VALUES (n, n)` for n = 1, 2, ... while `work` runs; each
    commit's event must come on `victim` (a stream of `ticks`, past its `ready`) within
    `lively_s`, and `/health` answer within it too. Returns each commit-to-event time."""
    took: list[float] = []
    while work.is_alive():
        tick = len(took) + 1
        started = time.monotonic()
        server.sql(f"INSERT INTO ticks VALUES ({tick}, {tick})")
        event = victim.take(1)[0]
        assert event["event"] == "change" and event["data"]["row"]["id"] == tick
        took.append(time.monotonic() - started)
        assert took[-1] < lively_s, took
        health = server.get("/health", token=None, timeout=lively_s)
        assert health.status_code == 200
        time.sleep(TICK_SECONDS)
    return took
