"""Window functions in a select list: `row_number() OVER (PARTITION BY a ORDER BY b)`, as
pgjdbc's `getColumns` and pgcli's catalog queries write it.

PostgreSQL computes a window function over the rows the FROM and WHERE give (after any
grouping), each row's value from its partition (the rows equal in every PARTITION BY value,
NULLs equal) in the window's ORDER BY; the select list's ORDER BY, DISTINCT and LIMIT come
after. Here the calls are taken out of the select list into columns of a relation that reads
the source, keeps the rows the WHERE keeps, and adds each row's values (`expanded`); the
select then reads those columns (its WHERE keeps the same rows again). `row_number()` is the
row's place in its partition from 1 (peers in the order read); another window function, or
one in a grouped select list, answers 0A000.

`expanded` also takes set-returning calls out of the select list (`set_returning`), after
the windows, as PostgreSQL computes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from refimpl.engine.query import set_returning
from refimpl.engine.query.compiled import Scope, ScopeColumn
from refimpl.engine.query.expressions import compile_expression, is_grouped
from refimpl.engine.query.ordering import sort_rows
from refimpl.engine.query.relations import Relation
from refimpl.errors import NotAllowed, SqlError
from refimpl.sql import ast

WINDOW_FUNCTIONS = frozenset({"row_number"})
_PREFIX = "\0window"
Row = Sequence[Any]


def calls(expr: ast.Expr | None) -> list[ast.WindowCall]:
    """The window calls in an expression; none inside a subquery."""
    return ast.outermost(expr, ast.WindowCall)


@functools.lru_cache(maxsize=4096)
def needs_relation(select: ast.Select) -> bool:
    """Whether the select list has a window or set-returning call (see `expanded`)."""
    found = any(calls(item.expr) for item in select.items) or calls(select.where)
    return set_returning.has_sets(select) or bool(found)


def expanded(select: ast.Select, source: Any, scope: Scope) -> tuple[ast.Select, Any]:
    """`select` over a relation that computes its window calls, then its set-returning
    calls (either may be absent). `scope` gives parameters, functions and the outer query."""
    found = [call for item in select.items for call in calls(item.expr)]
    if found or calls(select.where):
        select, source = _with_windows(select, source, scope, found)
    if set_returning.has_sets(select):
        select, source = set_returning.with_sets(select, source, scope)
    return select, source


def _with_windows(
    select: ast.Select, source: Any, scope: Scope, found: list[ast.WindowCall]
) -> tuple[ast.Select, Relation]:
    if calls(select.where):
        raise SqlError("window functions are not allowed in WHERE; filter in an outer query")
    if is_grouped(select):
        raise NotAllowed(
            "window functions in a grouped select list are not supported; group in a"
            " subquery of FROM and number its rows outside"
        )
    inner = set_returning.inner_columns(source)
    inner_scope = scope.over(inner, "a window")
    where = None if select.where is None else compile_expression(select.where, inner_scope).fn
    numbering: list[Callable[[list[Row]], list[int]]] = []
    names: dict[ast.Expr, str] = {}
    extra: list[ScopeColumn] = []
    for call in dict.fromkeys(found):
        numbering.append(_row_number(call, inner_scope))
        names[call] = f"{_PREFIX}{len(extra)}"
        extra.append(ScopeColumn(len(inner) + len(extra), "BIGINT", names[call]))
    rows = set_returning.source_rows(source)

    def produce() -> Iterator[Row]:
        kept = [row for row in rows() if where is None or where(row) is True]
        columns = [number(kept) for number in numbering]
        for at, row in enumerate(kept):
            yield (*row, *(values[at] for values in columns))

    relation = Relation(
        [*inner, *extra],
        produce,
        star=list(source.star) if isinstance(source, Relation) else [c.index for c in inner],
    )
    return set_returning.replaced_in(select, names), relation


def _at(fn: Callable[[Row], Any], rows: list[Row]) -> Callable[[int], Any]:
    return lambda at: fn(rows[at])


def _row_number(call: ast.WindowCall, scope: Scope) -> Callable[[list[Row]], list[int]]:
    if call.name not in WINDOW_FUNCTIONS:
        raise NotAllowed(
            f"the window function {call.name}() is not supported; row_number() is the one"
            " window function here"
        )
    if call.args:
        raise SqlError("row_number() takes no argument")
    keys = [compile_expression(e, scope).fn for e in call.partition_by]
    order = [(compile_expression(o.expr, scope).fn, o) for o in call.order_by]

    def numbers(rows: list[Row]) -> list[int]:
        partitions: dict[tuple, list[int]] = {}
        for at, row in enumerate(rows):
            partitions.setdefault(tuple(key(row) for key in keys), []).append(at)
        by_place = [(_at(fn, rows), item) for fn, item in order]
        place = [0] * len(rows)
        for members in partitions.values():
            for number, at in enumerate(sort_rows(members, by_place), start=1):
                place[at] = number
        return place

    return numbers
