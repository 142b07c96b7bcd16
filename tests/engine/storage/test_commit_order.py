"""Every commit path makes its commit visible in one order, inside its exclusive hold of the
state lock: the rows installed, the revision counters moved, the waiters woken, and only
then `applied_lsn` set (`Database._make_visible`). `live_answers.StateReads` and the result
cache rely on it; these tests watch the order from the two steps in the middle."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.storage.database import Database
from refimpl.engine.tracking.revisions import Touched
from refimpl.engine.tracking.signals import WakeBoard
from tests.engine.storage.trade_rows import TRADES, trades


@dataclass(frozen=True)
class Seen:
    """What a step of a commit saw of the database."""

    step: str  # "advance" (the revision counters) or "wake"
    table: str
    exclusive: bool  # the state lock held for writing
    rows: int  # the table's committed rows
    counter: int  # the table's revision counter
    applied_lsn: int


class WatchedBoard(WakeBoard):
    """A wake board that notes the database's state at each wake, and at each advance of
    its revision counters."""

    def __init__(self, database: Database) -> None:
        super().__init__()
        self.database = database
        self.seen: list[Seen] = []
        advance, advance_one = database.revisions.advance, database.revisions.advance_one

        def advancing(changes: dict[str, Touched]) -> None:
            self.note("advance", *changes)
            advance(changes)

        def advancing_one(table: str, touched: Touched) -> None:
            self.note("advance", table)
            advance_one(table, touched)

        database.revisions.advance = advancing  # type: ignore[method-assign]
        database.revisions.advance_one = advancing_one  # type: ignore[method-assign]
        database.wake_board = self

    def note(self, step: str, *tables: str) -> None:
        database = self.database
        for table in tables:
            committed = database.tables.get(table)
            self.seen.append(
                Seen(
                    step,
                    table,
                    database.state_lock._writing,
                    len(committed) if committed is not None else -1,
                    database.revisions.table_n(table),
                    database.applied_lsn,
                )
            )

    def notify(self, table: str, values: frozenset[object], everything: bool) -> None:
        self.note("wake", table)
        super().notify(table, values, everything)


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("in_transaction", [False, True])
def test_an_insert_is_installed_and_counted_before_its_wake_and_applied_after(
    tmp_path: Path, in_transaction: bool, rows: int
) -> None:
    """Two rows, or one row (committed by `Database.commit_new_row` out of a transaction)."""
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute("CREATE TABLE a (id INT PRIMARY KEY, v DOUBLE)", ())
        session.execute(
            "CREATE TABLE b (time TIMESTAMP, sym SYMBOL) TIMESERIES(time) PARTITION BY DAY,"
            " SYMBOL(sym)",
            (),
        )
        database = session.database
        board = WatchedBoard(database)
        before = database.applied_lsn
        counters = database.revisions.table_n("a"), database.revisions.table_n("b")
        if in_transaction:
            session.execute("BEGIN", ())
        values = "(1, 0.5), (2, 1.5)" if rows == 2 else "(1, 0.5)"
        session.execute(f"INSERT INTO a VALUES {values}", ())
        if in_transaction:
            session.execute("INSERT INTO b VALUES (1, 'X')", ())  # a value's revision too
            session.execute("COMMIT", ())
        after = database.applied_lsn
        assert after > before
        tables = ["a", "b"] if in_transaction else ["a"]
        # One advance for the commit, then a wake per table, in the one exclusive hold.
        assert [(seen.step, seen.table) for seen in board.seen] == [
            *(("advance", table) for table in tables),
            *(("wake", table) for table in tables),
        ]
        for seen in board.seen:
            assert seen.exclusive
            assert seen.rows == (rows if seen.table == "a" else 1)  # installed first
            assert seen.applied_lsn == before  # set only after the wake
            if seen.step == "wake":
                assert seen.counter > counters[seen.table == "b"]  # counted before it
    instance.close()


def test_a_bulk_load_is_installed_and_counted_before_its_wake_and_applied_after(
    tmp_path: Path,
) -> None:
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute(TRADES, ())
        database = session.database
        board = WatchedBoard(database)
        before, counter = database.applied_lsn, database.revisions.table_n("trades")
        loaded = database.load_rows("trades", trades(3000))
        assert loaded is not None
        _, lsn = loaded
        database.wait_durable(lsn)
        assert database.applied_lsn == lsn > before
        assert board.seen == [
            Seen("advance", "trades", True, 3000, counter, before),
            Seen("wake", "trades", True, 3000, counter + 1, before),
        ]
    instance.close()
