"""Many subscribers of one candle query on GET /api/subscribe against a real server, many
commits: after every commit each subscriber's answer equals a fresh run of the query over
/exec (spec: subscribe, what wakes a waiting request).

A subscriber's long poll that was marked as having seen a commit its answer lacks would
wait on until the next commit changing the answer (or its `wait`), while a fresh run shows
the trade: the check after each commit, with a deadline far shorter than `wait`, catches it.
The short form commits COMMITS trades; the `long` form LONG_COMMITS
(`python -m pytest -m long tests/http/test_subscribe_stress.py`). Read the shared answer and
the revision it is marked with apart, and this test fails within a few hundred commits.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.http.conftest import Server, running_server
from tests.http.stream_client import sse_events

SUBSCRIBERS = 10
COMMITS = 300
LONG_COMMITS = 3000
# Far below WAIT_MS: a subscriber that missed a commit is still waiting at the deadline.
CATCH_UP_SECONDS = 10.0
WAIT_MS = 30_000
THREADS = 64  # a quarter may wait (16): every subscriber's long poll waits, none busy-loops
SELECT = (
    "SELECT date_trunc('minute', time) AS m, first(price) AS open, max(price) AS high,"
    " min(price) AS low, last(price) AS close, count(*) AS n FROM trades"
    " WHERE symbol = 'NABIL' GROUP BY m ORDER BY m"
)
Row = tuple[Any, ...]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's server, with wait places for every subscriber (the folder's `db`
    fixture makes each test's database on it)."""
    with running_server(
        tmp_path_factory.mktemp("stress") / "data", "--threads", str(THREADS)
    ) as running:
        yield running


class Subscriber(threading.Thread):
    """A client of the candle query: long polls in a loop on a keep-alive connection,
    applying each answer as the spec says (rows by their key `m`)."""

    def __init__(self, server: Server, db: str) -> None:
        super().__init__(daemon=True)
        self.server, self.db = server, db
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {server.token}"
        self.rows: dict[Any, Row] = {}
        self.id: str | None = None
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _ask(self, wait: int) -> None:
        params: dict[str, Any] = {"query": "SUBSCRIBE " + SELECT, "db": self.db, "wait": wait}
        if self.id is not None:
            params["id"] = self.id
        response = self.http.get(self.server.url + "/api/subscribe", params=params, timeout=60)
        assert response.status_code == 200, response.text
        for ident, kind, data in sse_events(response.text):
            with self.changed:
                if kind == "snapshot":
                    assert data is not None
                    self.rows = {row[0]: tuple(row) for row in json.loads(data)["rows"]}
                elif kind == "rows":
                    assert data is not None
                    change = json.loads(data)
                    for key in change["removed_keys"]:
                        self.rows.pop(key[0], None)
                    for row in change["rows"]:
                        self.rows[row[0]] = tuple(row)
                if ident is not None:
                    self.id = ident
                self.changed.notify_all()

    def answer(self) -> list[Row]:
        with self.changed:
            return sorted(self.rows.values())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._ask(WAIT_MS)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
            with self.changed:
                self.changed.notify_all()


def _trade(server: Server, db: str, n: int) -> None:
    # Trades spread over 40 minutes: most commits change a candle, some open a new one;
    # every seventh is another symbol's, which changes nothing of the answer.
    second = (n * 37) % 2400
    symbol = "NEPSE" if n % 7 == 3 else "NABIL"
    stamp = f"2026-09-24T10:{second // 60:02}:{second % 60:02}Z"
    server.sql(f"INSERT INTO trades VALUES ('{stamp}', '{symbol}', {1500 + n % 97})", db)


def _run(server: Server, db: str, commits: int) -> None:
    server.sql(
        "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
        " PARTITION BY DAY, SYMBOL(symbol)",
        db,
    )
    server.sql("INSERT INTO trades VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1500)", db)
    subscribers = [Subscriber(server, db) for _ in range(SUBSCRIBERS)]
    for subscriber in subscribers:
        subscriber._ask(0)  # the snapshot, before any trade of the run
        subscriber.start()
    try:
        for n in range(commits):
            _trade(server, db, n)
            fresh = sorted(tuple(row) for row in server.rows(SELECT, db))
            deadline = time.monotonic() + CATCH_UP_SECONDS
            for number, subscriber in enumerate(subscribers):
                with subscriber.changed:
                    while subscriber.error is None and sorted(subscriber.rows.values()) != fresh:
                        left = deadline - time.monotonic()
                        held = subscriber.answer()
                        assert left > 0, (
                            f"after commit {n}, subscriber {number} still answers"
                            f" {sorted(set(held) - set(fresh))} where a fresh run gives"
                            f" {sorted(set(fresh) - set(held))}"
                        )
                        subscriber.changed.wait(left)
                assert subscriber.error is None, subscriber.error
    finally:
        for subscriber in subscribers:
            subscriber.stop.set()
        # Their last long polls end with the next commit that changes the answer.
        _trade(server, db, 0)
        for subscriber in subscribers:
            subscriber.join(30)


def test_every_subscriber_gets_every_commit(server: Server, db: str) -> None:
    _run(server, db, COMMITS)


@pytest.mark.long
def test_every_subscriber_gets_every_commit_long(server: Server, db: str) -> None:
    _run(server, db, LONG_COMMITS)
