"""Set-returning functions in a select list: `SELECT unnest(indkey) AS attnum,
generate_subscripts(indkey, 1) AS ord FROM pg_index`, as SQLAlchemy's and pgcli's catalog
queries write them.

PostgreSQL's rule (since 10): the set-returning calls of one select list run in lockstep
over each row the FROM and WHERE give; the row gives as many rows as its longest set, the
shorter sets padded with NULL, and none when every set is empty; everything else in the
select list is computed once for each of those rows. Here the calls are taken out of the
select list into columns of a relation that expands each source row so (`with_sets`), and
the select reads those columns. The WHERE, which cannot see a set's values, keeps the same
rows before or after the expansion, and ORDER BY, DISTINCT and LIMIT come after it, as in
PostgreSQL. A grouped select list with a set-returning call (the sets then come after the
grouping) and a call nested in another's arguments answer 0A000.

The functions: `unnest(array)`, its elements in order; `generate_subscripts(array, dim
[, reverse])`, its subscripts (from 1 in an array, from 0 in an int2vector or oidvector, as
PostgreSQL numbers them); `generate_series(start, stop [, step])` of integers;
`information_schema._pg_expandarray(array)`, PostgreSQL's records `(x, n)` of each element
and its place from 1 (pgjdbc's `getPrimaryKeys` reads them as `(... ).n`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from refimpl.engine.query.arrays import element_type, elements, record_type
from refimpl.engine.query.compiled import Compiled, Scope, ScopeColumn
from refimpl.engine.query.expressions import compile_expression, is_grouped
from refimpl.engine.query.relations import Relation
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import InvalidValue, NotAllowed, SqlError, TypeMismatch
from refimpl.sql import ast

EXPAND_ARRAY = "information_schema._pg_expandarray"
SET_RETURNING = frozenset({"unnest", "generate_subscripts", "generate_series", EXPAND_ARRAY})
# A set's column in the expanded relation: a name no SQL text can spell.
_PREFIX = "\0set"

Row = Sequence[Any]
Values = Callable[[Row], list[Any]]


def calls(expr: ast.Expr | None) -> list[ast.FuncCall]:
    """The set-returning calls in an expression, outermost first; none inside a subquery."""
    return ast.outermost(expr, ast.FuncCall, lambda call: call.name in SET_RETURNING)


@functools.lru_cache(maxsize=4096)
def has_sets(select: ast.Select) -> bool:
    """Whether the select list calls a set-returning function."""
    return any(calls(item.expr) for item in select.items)


def with_sets(select: ast.Select, source: Any, scope: Scope) -> tuple[ast.Select, Relation]:
    """`select` with its set-returning calls as columns of a relation over `source` (None:
    no FROM) that yields each source row once per element of its sets. `scope` gives the
    parameters, functions and outer query."""
    found = [call for item in select.items for call in calls(item.expr)]
    for call in found:
        if any(calls(arg) for arg in call.args):
            raise NotAllowed(
                f"a set-returning call inside {call.name}()'s arguments is not supported"
            )
    if is_grouped(select):
        raise NotAllowed(
            "set-returning functions (unnest, generate_series, generate_subscripts) in a"
            " grouped select list are not supported; call them in a subquery of FROM"
        )
    inner = inner_columns(source)
    inner_scope = scope.over(inner, "the select list")
    sets: list[Values] = []
    names: dict[ast.FuncCall, str] = {}
    extra: list[ScopeColumn] = []
    for call in dict.fromkeys(found):  # one set for each distinct call, as PostgreSQL
        values, type_ = _set(call, inner_scope)
        names[call] = f"{_PREFIX}{len(sets)}"
        extra.append(ScopeColumn(len(inner) + len(sets), type_, names[call]))
        sets.append(values)
    rows = source_rows(source)
    relation = Relation(
        [*inner, *extra],
        lambda: _expand(rows(), sets),
        star=list(source.star) if isinstance(source, Relation) else [c.index for c in inner],
        qualifier=None if isinstance(source, Relation) else getattr(source, "qualifier", None),
    )
    return replaced_in(select, names), relation


def replaced_in(select: ast.Select, names: dict[Any, str]) -> ast.Select:
    """`select` with each call of `names` in its select list and ORDER BY read from the
    column so named (an item that was the call alone keeps the call's name)."""
    items = tuple(
        ast.SelectItem(
            _replaced(item.expr, names),
            item.alias
            or (item.expr.name if isinstance(item.expr, ast.FuncCall | ast.WindowCall) else None),
        )
        for item in select.items
    )
    order_by = tuple(
        dataclasses.replace(order, expr=_replaced(order.expr, names)) for order in select.order_by
    )
    return dataclasses.replace(select, items=items, order_by=order_by)


def inner_columns(source: Any) -> list[ScopeColumn]:
    """The columns of a select's source (None: no FROM) as its scope names them."""
    if source is None:
        return []
    if isinstance(source, Relation):
        return list(source.scope_columns)
    qualifier = source.qualifier or (source.schema.name if source.schema else None)
    lowered = qualifier.lower() if qualifier else None
    return [
        ScopeColumn(i, c.type, c.name, lowered, False, c.pg_type, c.pg_typmod)
        for i, c in enumerate(source.columns)
    ]


def source_rows(source: Any) -> Callable[[], Iterable[Row]]:
    """The rows of a select's source, read each time it is called."""
    if source is None:
        return lambda: [()]
    return lambda: source.rows(AccessHints())


def _expand(rows: Iterable[Row], sets: list[Values]) -> Iterator[Row]:
    for row in rows:
        lists = [values(row) for values in sets]
        longest = max(len(values) for values in lists)
        for at in range(longest):
            yield (*row, *(values[at] if at < len(values) else None for values in lists))


def _set(call: ast.FuncCall, scope: Scope) -> tuple[Values, str]:
    """A call's values for a row, and their type."""
    if call.distinct or call.star or call.order_by:
        raise SqlError(f"{call.name}() is no aggregate: it takes no DISTINCT, * or ORDER BY")
    args = [compile_expression(arg, scope) for arg in call.args]
    if call.name == "generate_series":
        return _series(args)
    if not args or args[0].type != "NULL" and element_type(args[0].type) is None:
        shown = args[0].type if args else "no argument"
        raise TypeMismatch(f"{call.name}() takes an array, not {shown}")
    array = args[0].fn
    if call.name in ("unnest", EXPAND_ARRAY):
        if len(args) != 1:
            raise SqlError(f"{call.name}() in a select list takes one array")
        element = element_type(args[0].type) or "STRING"
        if call.name == EXPAND_ARRAY:  # PostgreSQL's records (x, n): element, place from 1
            return lambda row: [
                (x, n) for n, x in enumerate(_elements(array(row), element)[0], start=1)
            ], record_type([("x", element), ("n", "INT")])
        return lambda row: _elements(array(row), element)[0], element
    if len(args) not in (2, 3):
        raise SqlError("generate_subscripts() takes an array, a dimension and [reverse]")
    dimension, reverse = args[1].fn, (args[2].fn if len(args) == 3 else lambda row: False)

    def subscripts(row: Row) -> list[Any]:
        items, first = _elements(array(row), "STRING")
        if dimension(row) != 1:
            return []  # one-dimensional arrays only: no subscripts in another dimension
        numbers = list(range(first, first + len(items)))
        return numbers[::-1] if reverse(row) else numbers

    return subscripts, "INT"


def _elements(text: str | None, element: str) -> tuple[list[Any], int]:
    if text is None:
        return [], 1
    return elements(text, element)


def _series(args: list[Compiled]) -> tuple[Values, str]:
    if len(args) not in (2, 3) or any(a.type not in ("INT", "BIGINT", "NULL") for a in args):
        raise SqlError("generate_series() takes two or three integers: start, stop [, step]")
    type_ = "INT" if all(a.type in ("INT", "NULL") for a in args) else "BIGINT"
    fns = [a.fn for a in args]

    def numbers(row: Row) -> list[Any]:
        start, stop, step = (*(fn(row) for fn in fns), 1)[:3]
        if start is None or stop is None or step is None:
            return []
        if step == 0:
            raise InvalidValue("the step of generate_series() must not be zero")
        return list(range(start, stop + (1 if step > 0 else -1), step))

    return numbers, type_


def _replaced(expr: ast.Expr, names: dict[Any, str]) -> Any:
    """`expr` with each call of `names` read from its column (not inside subqueries)."""
    if isinstance(expr, ast.FuncCall | ast.WindowCall) and expr in names:
        return ast.ColumnRef(names[expr])
    if isinstance(expr, tuple):
        return tuple(_replaced(item, names) for item in expr)
    if not isinstance(expr, ast.Expr) or not hasattr(expr, "__dataclass_fields__"):
        return expr
    node: Any = expr
    changes = {
        name: _replaced(getattr(node, name), names)
        for name in node.__dataclass_fields__
        if name != "query"
    }
    return dataclasses.replace(node, **changes)
