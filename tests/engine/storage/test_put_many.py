"""`Table.put_many` leaves a table exactly as `put` of each row in turn does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Ident, Row, Table
from refimpl.sql import ast
from refimpl.sql.parser import parse

DAY = 86_400_000_000
TABLES = {
    "key, day and symbol": "(k INT PRIMARY KEY, t TIMESTAMP, s SYMBOL)"
    " TIMESERIES(t) PARTITION BY DAY, SYMBOL(s)",
    "key only": "(k INT PRIMARY KEY, t TIMESTAMP, s SYMBOL)",
    "key and index": "(k INT PRIMARY KEY, t TIMESTAMP, s SYMBOL, INDEX by_s (s))",
    "row ids by day": "(k INT, t TIMESTAMP, s SYMBOL) TIMESERIES(t) PARTITION BY DAY",
    "row ids by symbol, sorted by a column that may be NULL": "(k INT, t TIMESTAMP, s SYMBOL)"
    " PARTITION BY NONE, SYMBOL(s) SORT BY (s, k)",
    "key by month and symbol": "(k INT PRIMARY KEY, t TIMESTAMP, s SYMBOL)"
    " TIMESERIES(t) PARTITION BY MONTH, SYMBOL(s) SORT BY (t, s)",
}


def new_table(kind: str) -> Table:
    statement = parse(f"CREATE TABLE q {TABLES[kind]}").statements[0]
    assert isinstance(statement, ast.CreateTable)
    return Table(TableSchema.from_create(statement))


def state(table: Table) -> tuple:
    """Everything a reader or a later write can see of a table."""
    partitions = {part: list(rows.items()) for part, rows in table.partitions.items()}
    secondary = {name: list(index.entries) for name, index in table.secondary.items()}
    return partitions, dict(table.index), table.next_rowid, secondary


rows = st.tuples(st.integers(0, 30), st.integers(-3, 3), st.sampled_from([None, "A", "B"]))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TABLES)), st.lists(rows, max_size=30), st.lists(rows, max_size=60))
def test_put_many_is_put_of_each_row(
    kind: str, before: list[tuple[int, int, str | None]], batch: list[tuple[int, int, str | None]]
) -> None:
    one_by_one, at_once = new_table(kind), new_table(kind)
    for table in (one_by_one, at_once):
        for k, day, symbol in before:
            row = (k, day * DAY + k, symbol)
            table.put(ident_for(table, row), row)
    shared = at_once.clone()  # partitions shared copy-on-write: written ones are copied
    pairs: dict[Ident, Row] = {}
    for k, day, symbol in batch:
        row = (k, day * DAY + k, symbol)
        pairs[ident_for(one_by_one, row)] = row
    untouched = state(at_once)
    for ident, row in pairs.items():
        one_by_one.put(ident, row)
    shared.put_many(list(pairs), list(pairs.values()))
    assert state(shared) == state(one_by_one)
    assert state(at_once) == untouched


def ident_for(table: Table, row: Row) -> Ident:
    """The row's key, or for a table without key a row id of its own (one a row)."""
    return table.ident_of(row) if table.keyed else (table.allocate_rowid(),)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TABLES)), st.lists(rows, max_size=40))
def test_place_all_is_place_of_each_row(
    kind: str, batch: list[tuple[int, int, str | None]]
) -> None:
    table = new_table(kind)
    placed = [(k, day * DAY + k, symbol) for k, day, symbol in batch]
    idents = [ident_for(table, row) for row in placed]
    parts, orders = table.place_all(placed, idents)
    assert list(zip(parts, orders, strict=True)) == [
        table.place(row, ident) for row, ident in zip(placed, idents, strict=True)
    ]


def test_put_many_across_slices() -> None:
    """More rows than one slice of `put_many`: slices of new rows, a few replacing old ones."""
    one_by_one, at_once = new_table("key, day and symbol"), new_table("key, day and symbol")
    rows = [(k, k % 3 * DAY + k, [None, "A", "B"][k % 3]) for k in range(10_000)]
    for table in (one_by_one, at_once):
        for row in rows[::997]:
            table.put(ident_for(table, row), row)
    for row in rows:
        one_by_one.put(ident_for(one_by_one, row), row)
    at_once.put_many([ident_for(at_once, row) for row in rows], rows)
    assert state(at_once) == state(one_by_one)
