"""EventCursor.take within a byte budget: takes one after another give every change once, in
order, whatever the budget and however many rows each transaction has, and each take stops
once it reached the budget (at the change that reached it, inside a transaction too)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator

import pytest

import refimpl
from refimpl.engine.features.event_cursor import CHANGE, Event, EventCursor, Position
from refimpl.engine.features.recent_transactions import RecentTransactions

ROWS = [1, 1, 3, 1, 2, 1, 1, 1, 4, 1, 1, 2, 1, 1, 1, 1, 3, 1, 1, 1]  # rows of each commit


@pytest.fixture(scope="module")
def recent() -> Iterator[tuple[RecentTransactions, Position]]:
    """The recent transactions of a table after ROWS' commits, and the place before them."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, v DOUBLE)")
        database = conn.instance.database(conn.database)
        found = RecentTransactions(database, database.name)
        before = Position(found.durable_lsn)
        ident = 0
        for rows in ROWS:
            values = ", ".join(f"({ident + k}, {k}.5)" for k in range(rows))
            conn.execute(f"INSERT INTO c VALUES {values}")
            ident += rows
        yield found, before
        conn.close()


def _cost(events: list[Event]) -> int:
    return sum(len(event.data) + 40 for event in events)  # as the cursor counts a change


@pytest.mark.parametrize("budget", [1, 150, 400, 1000, 1 << 30])
def test_takes_within_a_budget_give_every_change_once_and_stop_at_it(
    recent: tuple[RecentTransactions, Position], budget: int
) -> None:
    found, before = recent
    cursor = EventCursor(found, lambda table: True, 300.0, time.time, before, lambda: None)
    took: list[Event] = []
    while True:
        taken = cursor.take(budget)
        changes = [e for e in taken.events if e.kind == CHANGE]
        # It stopped at the change that reached the budget: none of it is past that one.
        assert _cost(changes[:-1]) < budget
        if taken.more:
            assert _cost(changes) >= budget
        took += changes
        if not taken.more:
            break
    ids = [(lsn, n) for lsn, n in (map(int, e.id.split(".")) for e in took)]
    lsn = before.after_lsn + 1
    assert ids == [(lsn + t, n) for t, rows in enumerate(ROWS) for n in range(1, rows + 1)]
