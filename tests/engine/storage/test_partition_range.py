"""`parts_for_period_range` by bisection gives exactly the partitions a look at each gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import PartKey, Table, parts_for_period_range
from refimpl.sql import ast
from refimpl.sql.parser import parse

DAY = 86_400_000_000
LAYOUTS = {
    "day and symbol": " TIMESERIES(t) PARTITION BY DAY, SYMBOL(s)",
    "day": " TIMESERIES(t) PARTITION BY DAY",
    "symbol": " TIMESERIES(t) PARTITION BY NONE, SYMBOL(s)",
    "none": " TIMESERIES(t)",
}


def table_of(layout: str, rows: list[tuple[int, str | None]]) -> Table:
    statement = parse(f"CREATE TABLE q (t TIMESTAMP, s SYMBOL){LAYOUTS[layout]}").statements[0]
    assert isinstance(statement, ast.CreateTable)
    table = Table(TableSchema.from_create(statement))
    for day, symbol in rows:
        table.put((table.allocate_rowid(),), (day * DAY, symbol))
    return table


def looked_at_each(
    table: Table, low: str | None, high: str | None, symbol: tuple[bool, str] | None
) -> list[PartKey]:
    """What the partitions are, one by one: the definition the bisection must keep."""
    kept = []
    for part in table.partitions.keys():
        if table.layout.period is not None:
            if (low is not None and part[0] < low) or (high is not None and part[0] > high):
                continue
        if symbol is not None and (part[-2], part[-1]) != symbol:
            continue
        kept.append(part)
    return kept


symbols = st.one_of(st.none(), st.sampled_from(["", "A", "B", "C"]))
days = st.integers(-800, 800)


def bounds(table: Table) -> st.SearchStrategy[str | None]:
    """No bound, a period of the table (a bound on a partition) or any day's name."""
    named = [part[0] for part in table.partitions.keys()] if table.layout.period else []
    any_day = days.map(lambda d: f"{1970 + d // 365:04d}-01-{1 + d % 28:02d}")
    return st.one_of(st.none(), any_day, *([st.sampled_from(named)] if named else []))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(LAYOUTS)), st.lists(st.tuples(days, symbols), max_size=40), st.data())
def test_bisection_keeps_the_partitions_a_look_at_each_keeps(
    layout: str, rows: list[tuple[int, str | None]], data: st.DataObject
) -> None:
    table = table_of(layout, rows)
    low, high = data.draw(bounds(table)), data.draw(bounds(table))
    symbol = None  # only a table partitioned by symbol is asked for one
    if table.layout.symbol_position is not None:
        symbol = data.draw(st.one_of(st.none(), symbols.map(lambda s: (s is None, s or ""))))
    assert parts_for_period_range(table, low, high, symbol) == looked_at_each(
        table, low, high, symbol
    )
