"""EventCursor: what a stream takes follows its rights as they are at each take."""

from __future__ import annotations

import tempfile
import time

import refimpl
from refimpl.engine.features.event_cursor import CHANGE, EventCursor
from refimpl.engine.features.recent_transactions import RecentTransactions


def test_each_take_looks_at_the_streams_tables_once_and_again_at_the_next() -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, v DOUBLE)")
        conn.execute("CREATE TABLE d (id BIGINT PRIMARY KEY)")
        database = conn.instance.database(conn.database)
        readable = {"c": True, "d": True}
        looks: list[str] = []

        def follows(table: str) -> bool:
            looks.append(table)
            return readable[table]

        cursor = EventCursor(RecentTransactions(database, database.name), follows, 300.0, time.time)
        cursor.take(1 << 20)  # `ready`
        for n in range(5):
            conn.execute(f"INSERT INTO c VALUES ({n}, 0.5)")
            conn.execute(f"INSERT INTO d VALUES ({n})")
        taken = cursor.take(1 << 20)
        assert [e.kind for e in taken.events] == [CHANGE] * 10
        assert sorted(looks) == ["c", "d"]  # once a table, not once a commit
        readable["d"] = False  # its right taken away between two takes
        looks.clear()
        for n in range(5, 8):
            conn.execute(f"INSERT INTO c VALUES ({n}, 0.5)")
            conn.execute(f"INSERT INTO d VALUES ({n})")
        taken = cursor.take(1 << 20)
        assert [e.data.count(b'"table":"c"') for e in taken.events] == [1, 1, 1]
        assert sorted(looks) == ["c", "d"]
        conn.close()
