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


def test_a_revoke_answered_during_a_take_hides_what_the_take_reads_after_it() -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, v DOUBLE)")
        database = conn.instance.database(conn.database)
        version_now = [0]  # the rights' version
        readable = [True]
        looks: list[bool] = []

        def follows(table: str) -> bool:
            # The REVOKE lands while the take runs, just after its first look: the look
            # answers the rights from before it; the version moves before its answer.
            answer = readable[0]
            if not looks:
                readable[0] = False
                version_now[0] += 1
            looks.append(answer)
            return answer

        def version() -> int:
            return version_now[0]

        recent = RecentTransactions(database, database.name)
        cursor = EventCursor(recent, follows, 300.0, time.time, rights_version=version)
        cursor.take(1 << 20)  # `ready`
        for n in range(5):
            conn.execute(f"INSERT INTO c VALUES ({n}, 0.5)")
        taken = cursor.take(1 << 20)
        # The first commit was read under the rights from before the REVOKE; every later one
        # is read after its answer, and shown by the rights after it: not at all.
        assert [e.kind for e in taken.events] == [CHANGE]
        assert looks == [True, False]  # looked at again once, not once a commit
        for n in range(5, 8):
            conn.execute(f"INSERT INTO c VALUES ({n}, 0.5)")
        assert cursor.take(1 << 20).events == []
        conn.close()
