"""A `Table` against a model (a dict of identity -> row, ordered by the table's own placing)
through every writer path, with scans taken at random points and read only later.

Blocks are made tiny (8 keys) so that a few dozen writes split, join, borrow and copy them;
every rule is a path by which the storage engine writes a committed table (put, an UPDATE
moving a row to another partition or order, put_many of new and held rows, a bulk load's
install_prepared into new and held partitions, load, delete, clear, drop_partitions,
clone/reindexed twins). After each step every read (get, rows_of, len, scans whole, by
partition and by time range, secondary index entries) must equal the model's, and every
scan taken earlier must still give exactly the rows of its moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from refimpl.engine.storage import blocks, checkpoint, table_image
from refimpl.engine.storage.blocks import Blocks
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.sql import ast
from refimpl.sql.parser import parse

DAY = 86_400_000_000
Row = tuple[Any, ...]
Ident = tuple[Any, ...]

keys = st.integers(0, 40)
days = st.integers(0, 3)
values = st.integers(-2, 2)
rows_strategy = st.tuples(keys, days, values)


def make_row(k: int, day: int, v: int) -> Row:
    # t grows with k within a day, and a few keys share a time: equal times order by key
    return (k, day * DAY + (k % 7), v)


class TableModel(RuleBasedStateMachine):
    """A table partitioned by day and ordered by time then key."""

    SQL = "CREATE TABLE q (k INT PRIMARY KEY, t TIMESTAMP, v INT) TIMESERIES(t) PARTITION BY DAY"

    def new_table(self) -> Table:
        statement = parse(self.SQL).statements[0]
        assert isinstance(statement, ast.CreateTable)
        return Table(TableSchema.from_create(statement))

    def __init__(self) -> None:
        super().__init__()
        self.saved = blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL
        blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL = 8, 4, 2
        self.table = self.new_table()
        self.model: dict[Ident, Row] = {}
        # (scan taken, the rows it must give) and (twin left behind, its rows)
        self.scans: list[tuple[Iterator[Row], list[Row]]] = []
        self.twins: list[tuple[Table, list[Row]]] = []

    def teardown(self) -> None:
        try:
            for taken, then in self.scans:
                assert list(taken) == then
            for twin, its_rows in self.twins:
                assert list(twin.scan()) == its_rows
        finally:
            blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL = self.saved

    # -- the model -------------------------------------------------------------------------

    def ordered(self, rows: dict[Ident, Row] | None = None) -> list[Row]:
        held = self.model if rows is None else rows
        return sorted(held.values(), key=lambda r: self.table.place(r, (r[0],)))

    # -- writer paths ----------------------------------------------------------------------

    @rule(row=rows_strategy)
    def put(self, row: tuple[int, int, int]) -> None:
        made = make_row(*row)
        self.table.put((made[0],), made)
        self.model[(made[0],)] = made

    @rule(k=keys, day=days)
    def move(self, k: int, day: int) -> None:
        """An UPDATE of the time: the row moves to another partition or place in order."""
        old = self.model.get((k,))
        if old is None:
            return
        made = (k, day * DAY + 6 - (k % 7), old[2] + 1)
        assert self.table.put((k,), made) == old
        self.model[(k,)] = made

    @rule(batch=st.lists(rows_strategy, max_size=30, unique_by=lambda r: r[0]))
    def put_many(self, batch: list[tuple[int, int, int]]) -> None:
        made = [make_row(*r) for r in batch]
        self.table.put_many([(r[0],) for r in made], made)
        self.model.update({(r[0],): r for r in made})

    @rule(start=st.integers(41, 200), count=st.integers(1, 30), day=days)
    def install_prepared(self, start: int, count: int, day: int) -> None:
        """A bulk load's new rows, prepared as blocks, into a held or a new partition."""
        fresh = [k for k in range(start, start + count) if (k,) not in self.model]
        if not fresh:
            return
        made = [make_row(k, day, 0) for k in fresh]
        parts, orders = self.table.place_all(made, [(r[0],) for r in made])
        grouped: dict[Any, dict[Any, Row]] = {}
        for part, order, row in zip(parts, orders, made, strict=True):
            grouped.setdefault(part, {})[order] = row
        prepared = {part: (Blocks.from_dict(rows), rows) for part, rows in grouped.items()}
        index = {(r[0],): (p, o) for r, p, o in zip(made, parts, orders, strict=True)}
        self.table.install_prepared(prepared, index)
        self.model.update({(r[0],): r for r in made})

    @rule(k=st.integers(0, 200))
    def delete(self, k: int) -> None:
        assert self.table.delete((k,)) == self.model.pop((k,), None)

    @rule(low=st.integers(0, 200), width=st.integers(0, 20))
    def delete_run(self, low: int, width: int) -> None:
        """A DELETE of a range of keys: empties blocks and partitions at their edges."""
        for k in range(low, low + width):
            assert self.table.delete((k,)) == self.model.pop((k,), None)

    @precondition(lambda self: len(self.model) < 60)
    @rule()
    def clear(self) -> None:
        assert self.table.clear() == len(self.model)
        self.model = {}

    @rule(day=days)
    def drop_partition(self, day: int) -> None:
        part = self.table.place(make_row(0, day, 0), (0,))[0]
        gone = {i: r for i, r in self.model.items() if self.table.place(r, i)[0] == part}
        assert self.table.drop_partitions([part]) == len(gone)
        for ident in gone:
            del self.model[ident]

    @rule()
    def reload(self) -> None:
        """A checkpoint's load into a new table of what this one holds."""
        fresh = self.new_table()
        pairs = list(self.table.scan_with_idents())
        fresh.load([i for i, _ in pairs], [r for _, r in pairs])
        self.twins.append((self.table, self.ordered()))
        self.table = fresh

    @rule(chunk=st.integers(1, 9))
    def reload_image(self, chunk: int) -> None:
        """A checkpoint image of what this table holds, in chunks of `chunk` rows, loaded
        into a new table (kept encoded where the layout allows)."""
        saved, checkpoint.CHUNK_ROWS = checkpoint.CHUNK_ROWS, chunk
        try:
            image = table_image.TakenTable.of(self.table).image()
        finally:
            checkpoint.CHUNK_ROWS = saved
        fresh = self.new_table()
        fresh.next_rowid = image.next_rowid
        fresh.load_image(image)
        self.twins.append((self.table, self.ordered()))
        self.table = fresh

    @rule(keep_old=st.booleans())
    def clone(self, keep_old: bool) -> None:
        """A schema change's twin: the one written on is the twin, or (as a rollback
        leaves it) the original; the other must keep its rows."""
        twin = self.table.clone()
        if keep_old:
            self.twins.append((twin, self.ordered()))
        else:
            self.twins.append((self.table, self.ordered()))
            self.table = twin

    @rule(day=days)
    def snapshot(self, day: int) -> None:
        table = self.table
        self.scans.append((table.scan(), self.ordered()))
        parts = list(table.partitions.keys())[day : day + 2]
        self.scans.append(
            (table.scan(parts), [r for r in self.ordered() if table.place(r, (r[0],))[0] in parts])
        )
        lead = table.layout.lead_position  # the column a scan's bounds apply to
        if lead is not None:
            low, high = (
                (day * DAY + 2, (day + 1) * DAY + 3) if lead == 1 else (day * 9, day * 9 + 20)
            )
            wanted = [r for r in self.ordered() if low <= r[lead] <= high]
            self.scans.append((table.scan(None, low, high), wanted))

    # -- reads -----------------------------------------------------------------------------

    @invariant()
    def reads_equal_the_model(self) -> None:
        table, model = self.table, self.model
        assert len(table) == len(model)
        assert list(table.scan()) == self.ordered()
        assert all(table.partitions.values())  # no empty partition kept
        for k in range(-1, 205):
            assert table.get((k,)) == model.get((k,))
        wanted = [(k,) for k in range(0, 205, 3)]
        assert table.rows_of(wanted) == [r for r in self.ordered() if (r[0],) in set(wanted)]
        for part, partition in table.partitions.items():
            held = list(partition.keys())
            assert held == sorted(held)
            for order in held:
                assert table.index[order[-1:]] == (part, order)


TableModel.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_a_table_equals_its_model_and_scans_keep_their_moment = TableModel.TestCase


class PlainTableModel(TableModel):
    """A table in one partition ordered by its key alone: the layout whose checkpoint image
    is kept encoded and decoded a block at a time."""

    SQL = "CREATE TABLE q (k INT PRIMARY KEY, t TIMESTAMP, v INT)"


PlainTableModel.TestCase.settings = TableModel.TestCase.settings
test_a_plain_table_equals_its_model_through_encoded_images = PlainTableModel.TestCase
