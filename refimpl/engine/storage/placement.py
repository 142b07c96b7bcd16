"""Where a table's row lives: its partition and its order key within it, for one row
(`placer`, every write's) or many at once (`placements`, loads' and batches'), the choices
of a table's layout made once, not at every row placed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import add, is_, itemgetter
from typing import Any

from refimpl.engine.storage.schema import RowLayout, period_of, periods_of

Row = tuple[Any, ...]
Ident = tuple[Any, ...]
PartKey = tuple[Any, ...]
OrderKey = tuple[Any, ...]
Placer = Callable[[Row, Ident], tuple[PartKey, OrderKey]]
Placements = Callable[[Sequence[Row], Sequence[Ident]], tuple[list[PartKey], list[OrderKey]]]


def placer(layout: RowLayout, wrap: tuple[bool, ...]) -> Placer:
    """`Table.place` for a table of `layout`: the layout's choices are made here, once, not
    at every row placed (every write places its rows). `wrap[i]` says whether the i-th
    order column may be NULL: its values are then ordered as (is NULL, value)."""
    period, time_at, symbol_at = layout.period, layout.time_position, layout.symbol_position
    part_of: Callable[[Row], PartKey]
    if period is None and symbol_at is None:

        def part_of(row: Row) -> PartKey:
            return ()
    elif symbol_at is None:
        assert period is not None and time_at is not None  # partitioned by the time alone
        time_position, row_period = time_at, period

        def part_of(row: Row) -> PartKey:
            return (period_of(row[time_position], row_period),)
    elif period is None:

        def part_of(row: Row) -> PartKey:
            symbol = row[symbol_at]
            return (symbol is None, symbol or "")
    else:
        assert time_at is not None  # a period partitions by the time column
        time_position = time_at

        def part_of(row: Row) -> PartKey:
            symbol = row[symbol_at]
            return (period_of(row[time_position], period), symbol is None, symbol or "")

    positions = layout.order_positions
    if any(wrap):
        steps = tuple(zip(positions, wrap, strict=True))

        def place(row: Row, ident: Ident) -> tuple[PartKey, OrderKey]:
            order = tuple((row[at] is None, row[at]) if wraps else row[at] for at, wraps in steps)
            return part_of(row), (*order, *ident)
    elif len(positions) == 1:
        (at,) = positions

        def place(row: Row, ident: Ident) -> tuple[PartKey, OrderKey]:
            return part_of(row), (row[at], *ident)
    elif positions:
        columns = itemgetter(*positions)  # a tuple, for two or more positions

        def place(row: Row, ident: Ident) -> tuple[PartKey, OrderKey]:
            return part_of(row), (*columns(row), *ident)
    else:

        def place(row: Row, ident: Ident) -> tuple[PartKey, OrderKey]:
            return part_of(row), ident

    return place


def placements(layout: RowLayout, wrap: tuple[bool, ...]) -> Placements:
    """`Table.place_all` for a table of `layout`: the keys `placer` gives each row (a
    property test holds the two to each other), made by map and zip over columns of values,
    so placing a million rows takes no Python step per row unless a partition's SYMBOL
    value is NULL."""
    period, time_at, symbol_at = layout.period, layout.time_position, layout.symbol_position
    positions = layout.order_positions

    def place_all(
        rows: Sequence[Row], idents: Sequence[Ident]
    ) -> tuple[list[PartKey], list[OrderKey]]:
        part_columns: list[Iterable[Any]] = []
        if period is not None:
            part_columns.append(periods_of(map(itemgetter(time_at), rows), period))
        if symbol_at is not None:
            symbols: list[Any] = list(map(itemgetter(symbol_at), rows))
            part_columns.append(map(is_, symbols, repeat(None)))
            part_columns.append([s or "" for s in symbols] if None in symbols else symbols)
        if part_columns:
            # One key object a partition, not one a row: the index holds a million of them
            # after a big import, and the collector would go over each.
            made = list(zip(*part_columns, strict=True))
            kept: dict[PartKey, PartKey] = {}
            parts = list(map(kept.setdefault, made, made))
        else:
            parts = [()] * len(rows)
        if not positions:
            return parts, list(idents)
        order_columns: list[Iterable[Any]] = []
        for at, wraps in zip(positions, wrap, strict=True):
            values = list(map(itemgetter(at), rows))
            if wraps:  # a column that may be NULL is ordered as (is NULL, value)
                order_columns.append(zip(map(is_, values, repeat(None)), values, strict=True))
            else:
                order_columns.append(values)
        return parts, list(map(add, zip(*order_columns, strict=True), idents))

    return place_all
