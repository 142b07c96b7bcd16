"""ORDER BY over rows in memory: all of them in order (`sort_rows`), or only the first n of
that order (`first_rows`, for ORDER BY ... LIMIT n).

`first_rows` gives exactly the rows and the order that sorting everything and cutting would
give (ties keep the order the rows came in), at O(N log n) comparisons instead of O(N log N),
and as a loop of Python steps: a sort of a large list is one C call that keeps every other
thread from the interpreter lock until it ends, where a loop lets the lock go at each switch
interval.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import operator
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import Any

from refimpl.engine import admission
from refimpl.sql import ast

# One ORDER BY item: how a row gives its value, and the item (direction, NULLS FIRST/LAST).
OrderFn = tuple[Callable[[Any], Any], ast.OrderItem]
OrderFns = Sequence[OrderFn]

# `first_rows` sorts everything when it keeps more than this share of the rows: a heap of
# nearly all of them costs more than the sort it saves.
_HEAP_SHARE = 0.25
# `first_rows` reads the rows' first ORDER BY values a chunk at a time, by C calls.
_CHUNK_ROWS = 1024
# A longer list is sorted in runs of this many rows, merged by Python steps (`sort_rows`).
SORT_RUN = 8192


def _nulls_first(order: ast.OrderItem) -> bool:
    """Whether NULLs come first: as told, else last ascending and first descending."""
    nulls_first = order.nulls_first
    if nulls_first is None:
        nulls_first = order.descending
    return nulls_first


def _null_rank(order: ast.OrderItem) -> bool:
    """The rank a value's key starts with (a NULL's is its opposite), for a sort that is
    reversed for DESC."""
    # Sorting descending reverses the null flag too, so flip it to keep the asked place.
    return _nulls_first(order) != order.descending


def sort_rows(rows: list[Any], order_fns: OrderFns) -> list[Any]:
    """`rows` sorted in place by the ORDER BY items (stable: ties keep their order)."""
    for fn, order in reversed(order_fns):
        null_rank = _null_rank(order)

        def key(row: Any, fn: Callable[[Any], Any] = fn, null_rank: bool = null_rank) -> Any:
            value = fn(row)
            if value is None:
                return (not null_rank, 0)
            return (null_rank, value)

        # One sort runs in C without a checkpoint: a long one makes way before it starts.
        if len(rows) > 4096:
            admission.running_long()
        _sort_in_runs(rows, key, order.descending)
    return rows


def _sort_in_runs(rows: list[Any], key: Callable[[Any], Any], descending: bool) -> None:
    """`rows.sort(key=key, reverse=descending)`, stable as it is, in steps that let other
    threads have the interpreter lock: a sort of a list is one C call that holds it to the
    end (300,000 rows: 0.5 to 2.5 s in which no other request is answered), so a long list
    is sorted in runs of SORT_RUN rows, each one C call, and the runs are merged by a loop
    of Python steps (`heapq.merge`)."""
    if len(rows) <= SORT_RUN:
        rows.sort(key=key, reverse=descending)
        return
    # (key, place, row): the place keeps equal keys in their order, and rows are never
    # compared; descending, it is negated, as the reversed order reverses it back.
    step = -1 if descending else 1
    runs = []
    for start in range(0, len(rows), SORT_RUN):
        chunk = rows[start : start + SORT_RUN]
        places = range(step * start, step * (start + len(chunk)), step)
        run = list(zip(map(key, chunk), places, chunk, strict=True))
        run.sort(reverse=descending)
        runs.append(run)
    rows[:] = map(operator.itemgetter(2), heapq.merge(*runs, reverse=descending))
    while runs:  # freed a run at a time: all at once is one more long C step
        runs.pop()


def first_rows(rows: list[Any], order_fns: OrderFns, count: int) -> list[Any]:
    """The first `count` rows of `sort_rows(rows, order_fns)`: the same rows in the same order
    (ties keep their order in `rows`). `rows` may be reordered."""
    if count <= 0:
        return []
    if count >= len(rows) * _HEAP_SHARE:
        return sort_rows(rows, order_fns)[:count]
    first_fn, first_order = order_fns[0]
    first_part = _part(first_order)
    rest = [(fn, _part(order)) for fn, order in order_fns[1:]]
    # A row that loses on its first item still has its other items computed, as a sort
    # computes them (an error of one is the statement's), unless they only read a column.
    computed = [fn for fn, _ in order_fns[1:] if not isinstance(fn, operator.itemgetter)]
    # Kept: the best rows so far, in order, as (key, position, row, first value); the
    # position breaks ties, so rows themselves are never compared. Each ORDER BY value of
    # a row is computed once (ORDER BY random() keeps one value per row). `past` tells a
    # first value that cannot be kept any more; `within`, for values only, the others.
    kept: list[tuple[list[Any], int, Any, Any]] = []
    past: Callable[[Any], bool] | None = None
    within: Callable[[Any], bool] | None = None
    for start in range(0, len(rows), _CHUNK_ROWS):
        chunk = rows[start : start + _CHUNK_ROWS]
        firsts = list(map(first_fn, chunk))
        indices: Iterable[int] = range(len(chunk))
        if within is not None and not computed and None not in firsts:
            # Most rows lose on the first item alone: one C pass over the chunk sets them
            # aside, and the loop below sees only the others.
            indices = list(compress(indices, map(within, firsts)))
        for index in indices:
            first, row = firsts[index], chunk[index]
            if past is not None and past(first):
                for fn in computed:
                    fn(row)
                continue
            key = [first_part(first)]
            key += [part(fn(row)) for fn, part in rest]
            entry = (key, start + index, row, first)
            if len(kept) < count:
                bisect.insort(kept, entry)
                if len(kept) < count:
                    continue
            elif entry < kept[-1]:
                bisect.insort(kept, entry)
                kept.pop()
            else:
                continue
            past, within = _past(kept[-1][3], first_order)
    return [entry[2] for entry in kept]


def _past(
    worst: Any, order: ast.OrderItem
) -> tuple[Callable[[Any], bool], Callable[[Any], bool] | None]:
    """Whether a first item's value sorts strictly after `worst` (the last kept row's); and,
    when `worst` is a value, the opposite for values only, as a C call (None: no such)."""
    nulls_first = _nulls_first(order)
    if worst is None:
        return (_never if not nulls_first else _is_value), None
    # operator.lt/gt, not worst.__lt__: an int's own method answers NotImplemented to a float.
    if order.descending:
        after = functools.partial(operator.gt, worst)
        within = functools.partial(operator.le, worst)
    else:
        after = functools.partial(operator.lt, worst)
        within = functools.partial(operator.ge, worst)
    if nulls_first:
        return (lambda value: value is not None and after(value)), within
    return (lambda value: value is None or after(value)), within


def _never(value: Any) -> bool:
    return False


def _is_value(value: Any) -> bool:
    return value is not None


class _Descending:
    """A value that sorts in the opposite order of the one it wraps (for DESC values that
    cannot be negated, such as text). Only ever compared with another of one column."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and bool(self.value == other.value)

    __hash__ = None  # type: ignore[assignment]  # compared, never hashed


def _part(order: ast.OrderItem) -> Callable[[Any], Any]:
    """A value's part of a row's key: ascending order of keys (compared part by part) is
    the order of the ORDER BY items (as `sort_rows`' passes give it, from its last item to
    its first).

    A part is (rank, value): the rank puts NULLs first or last, so two values are compared
    only when neither is NULL. A DESC item negates the rank and the value (a number), or
    wraps the value in `_Descending`."""
    null_rank = _null_rank(order)
    if not order.descending:
        last = (not null_rank, 0)
        return lambda value: last if value is None else (null_rank, value)
    null = (-(not null_rank), 0)
    rank = -null_rank

    def descending(value: Any) -> Any:
        if value is None:
            return null
        if isinstance(value, (int, float)):
            return (rank, -value)  # a number's opposite order is its negation's: no call
        return (rank, _Descending(value))

    return descending
