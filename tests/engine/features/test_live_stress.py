"""Many subscribers of one live query, many commits: after every commit each subscriber's
answer equals a fresh run of the query (spec: subscribe, what wakes a waiting request).

A subscriber woken by a commit's wake-up runs while that commit is still being installed;
the shared answer it gets must include every commit its revision names, or its next long
poll waits for the following commit with an answer short of one trade.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

import refimpl
from refimpl.engine.features.live_queries import LiveWait, Reply, SubscriptionManager

TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(symbol)"
)
SELECT = (
    "SELECT date_trunc('minute', time) AS m, first(price) AS open, max(price) AS high,"
    " min(price) AS low, last(price) AS close, count(*) AS n FROM trades"
    " WHERE symbol = 'NABIL' GROUP BY m ORDER BY m"
)
SUBSCRIBERS = 10
COMMITS = 150
CATCH_UP_SECONDS = 5.0


@pytest.fixture
def conn(tmp_path) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path / "data")
    connection.execute(TRADES)
    connection.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1500)")
    yield connection
    connection.close()


class Subscriber(threading.Thread):
    """A client of one live query: long polls in a loop, applying each answer by identity."""

    def __init__(self, conn: refimpl.Connection, manager: SubscriptionManager) -> None:
        super().__init__(daemon=True)
        self.manager = manager
        self.session = conn.session()
        self.query = "SUBSCRIBE " + SELECT
        self.rows: dict[tuple, tuple] = {}
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        first = manager.ask_now(self.session, self.query, None)
        self.id = first.id
        self._apply(first)

    def _apply(self, reply: Reply) -> None:
        identity = reply.subscription.identity
        with self.changed:
            if reply.kind == "snapshot":
                self.rows = {identity(r): r for r in reply.rows}
            for key in reply.removed_keys:
                self.rows.pop(key, None)
            for row in reply.rows:
                self.rows[identity(row)] = row
            self.id = reply.id
            self.changed.notify_all()

    def answer(self) -> list[tuple]:
        with self.changed:
            return sorted(self.rows.values())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                step = self.manager.ask(self.session, self.query, self.id)
                if isinstance(step, LiveWait):
                    woken = threading.Event()
                    step.watch(woken)
                    reply = step.attempt()
                    while reply is None and not self.stop.is_set():
                        if woken.wait(0.2):
                            woken.clear()
                        reply = step.attempt()
                    step = reply or step.expire()
                self._apply(step)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error


def test_every_subscriber_sees_every_commit(conn: refimpl.Connection) -> None:
    manager = conn.instance.subscriptions
    # Switching threads often makes a woken subscriber run inside the commit that woke it,
    # which is where an answer was lost.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    subscribers = [Subscriber(conn, manager) for _ in range(SUBSCRIBERS)]
    for subscriber in subscribers:
        subscriber.start()
    try:
        for n in range(COMMITS):
            second = n % 240
            conn.execute(
                "INSERT INTO trades VALUES (?, 'NABIL', ?)",
                [f"2026-09-24T10:{second // 60:02}:{second % 60:02}Z", 1500 + n],
            )
            fresh = sorted(tuple(r) for r in conn.execute(SELECT).rows)
            deadline = time.monotonic() + CATCH_UP_SECONDS
            for number, subscriber in enumerate(subscribers):
                with subscriber.changed:
                    while sorted(subscriber.rows.values()) != fresh and subscriber.error is None:
                        left = deadline - time.monotonic()
                        assert left > 0, (
                            f"after commit {n}, subscriber {number} still answers"
                            f" {subscriber.answer()} where a fresh run gives {fresh}"
                        )
                        subscriber.changed.wait(left)
                assert subscriber.error is None, subscriber.error
    finally:
        sys.setswitchinterval(interval)
        for subscriber in subscribers:
            subscriber.stop.set()
        for subscriber in subscribers:
            subscriber.join(5)
