"""Answers combined: UNION, INTERSECT, EXCEPT; VALUES lists; ORDER BY and LIMIT over a whole.

Both sides of a set operation have the same number of columns; each result column takes the
common type of its two sides (INT and DOUBLE give DOUBLE; text and a number do not mix) and
the left side's name. Without ALL the result has no duplicate rows; with ALL, UNION keeps
every row, INTERSECT ALL a row as often as the fewer of its two sides has it, EXCEPT ALL as
often as the left has it more than the right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from refimpl.engine.query.compiled import (
    Compiled,
    Scope,
    ScopeColumn,
    common_type,
    refuse_blob,
    row_count,
)
from refimpl.engine.query.pg_names import (
    set_pg_types,
    typed_column,
    untyped_columns,
    values_pg_types,
    values_pg_typmods,
)
from refimpl.engine.query.select import QueryOutput, sort_rows
from refimpl.engine.result import Column
from refimpl.errors import SqlError, UnknownColumn
from refimpl.sql import ast

Compile = Callable[[ast.Expr, Scope], Compiled]


def _result_type(type_: str) -> str:
    refuse_blob(type_, "a query's answer")
    return "STRING" if type_ == "NULL" else type_


def combine(query: ast.SetOperation, left: QueryOutput, right: QueryOutput) -> QueryOutput:
    """`query`, whose sides answered `left` and `right`: `left op [ALL] right`. A side's
    column of a string constant or NULL takes the other's `pg_type` (`set_pg_types`)."""
    op, all_ = query.op, query.all
    if len(left.columns) != len(right.columns):
        raise SqlError(
            f"the two sides of {op} answer {len(left.columns)} and {len(right.columns)}"
            " columns; they must answer the same number"
        )
    # A side's column written as NULL says STRING; it takes the other side's type, as
    # PostgreSQL's `unknown` does (`SELECT now() UNION SELECT NULL`).
    nulls = zip(_nulls(query.left, left), _nulls(query.right, right), strict=True)
    types = [
        _result_type(common_type([_side_type(a, a_null), _side_type(b, b_null)], op))
        for a, b, (a_null, b_null) in zip(left.columns, right.columns, nulls, strict=True)
    ]
    pg_types = set_pg_types(
        [c.pg_type for c in left.columns],
        [c.pg_type for c in right.columns],
        untyped_columns(query.left),
        untyped_columns(query.right),
    )
    # A type modifier both sides have (a constant's, NULL's, is -1), as in PostgreSQL.
    columns = [
        typed_column(a.name, t, a.pg_name, p, a.pg_typmod if a.pg_typmod == b.pg_typmod else -1)
        for a, b, t, p in zip(left.columns, right.columns, types, pg_types, strict=True)
    ]
    first = _widened(
        left.rows, [t if a.type != t else "" for a, t in zip(left.columns, types, strict=True)]
    )
    second = _widened(
        right.rows, [t if b.type != t else "" for b, t in zip(right.columns, types, strict=True)]
    )
    if op == "UNION":
        rows = first + second if all_ else list(dict.fromkeys(first + second))
    elif op == "INTERSECT":
        if all_:
            rows = _counted(first, second, keep_matched=True)
        else:
            present = set(second)
            rows = [row for row in dict.fromkeys(first) if row in present]
    else:
        if all_:
            rows = _counted(first, second, keep_matched=False)
        else:
            absent = set(second)
            rows = [row for row in dict.fromkeys(first) if row not in absent]
    return QueryOutput(columns, rows)


def values_output(values: ast.Values, scope: Scope, compile_: Compile) -> QueryOutput:
    """A VALUES list as an answer: columns column1, column2, ... of each column's common type."""
    width = len(values.rows[0])
    compiled_rows = []
    for number, row in enumerate(values.rows, start=1):
        if len(row) != width:
            raise SqlError(
                f"row {number} of VALUES has {len(row)} value(s) but the first row has {width}"
            )
        compiled_rows.append([compile_(expr, scope) for expr in row])
    types = [
        _result_type(common_type([r[i].type for r in compiled_rows], "VALUES"))
        for i in range(width)
    ]
    rows = [tuple(c.fn(()) for c in row) for row in compiled_rows]
    pg_columns = zip(
        values_pg_types(values.rows, scope), values_pg_typmods(values.rows, scope), strict=True
    )
    columns = [
        typed_column(f"column{i + 1}", t, None, *pg)
        for i, (t, pg) in enumerate(zip(types, pg_columns, strict=True))
    ]
    return QueryOutput(columns, _widened(rows, types))


def _side_type(column: Column, null: bool) -> str:
    return "NULL" if null else column.type


def _nulls(query: ast.Query, output: QueryOutput) -> list[bool]:
    """Which of `output`'s columns a side of a set operation writes as NULL (a select list's
    `NULL`, not one of a subquery or of a set operation inside, typed text by then)."""
    while isinstance(query, ast.WithQuery):
        query = query.body
    written = [False] * len(output.columns)
    if isinstance(query, ast.Select) and len(query.items) == len(written):
        for index, item in enumerate(query.items):
            expr = item.expr
            written[index] = type(expr) is ast.Literal and expr.type == "NULL"
    return written


def _counted(first: list[tuple], second: list[tuple], keep_matched: bool) -> list[tuple]:
    """INTERSECT ALL (`keep_matched`) or EXCEPT ALL: the rows of `first` in order, each
    matched by one occurrence in `second` (used up by it) or not, kept or left out."""
    counts = Counter(second)
    rows = []
    for row in first:
        matched = counts[row] > 0
        if matched:
            counts[row] -= 1
        if matched is keep_matched:
            rows.append(row)
    return rows


def _widened(rows: list[tuple], types: list[str]) -> list[tuple]:
    """Rows with the integers of each DOUBLE column in `types` made floats (1 and 1.0 meet)."""
    floats = [i for i, t in enumerate(types) if t == "DOUBLE"]
    if not floats:
        return rows
    return [
        tuple(float(v) if i in floats and v is not None else v for i, v in enumerate(row))
        for row in rows
    ]


def order_and_limit(
    output: QueryOutput,
    order_by: Sequence[ast.OrderItem],
    limit: ast.Expr | None,
    offset: ast.Expr | None,
    scope: Scope,
    compile_: Compile,
) -> QueryOutput:
    """ORDER BY and LIMIT of a whole compound query: they name its result columns."""
    rows = output.rows
    if order_by:
        names = [c.name.lower() for c in output.columns]
        columns = [ScopeColumn(i, c.type, c.name) for i, c in enumerate(output.columns)]
        result_scope = Scope(
            columns=columns,
            params=scope.params,
            now=scope.now,
            functions=scope.functions,
            clause="ORDER BY",
        )
        keys: list[tuple[Callable[[Any], Any], ast.OrderItem]] = []
        for item in order_by:
            index = _position(item.expr, names)
            if index is not None:
                keys.append((itemgetter(index), item))
                continue
            try:
                keys.append((compile_(item.expr, result_scope).fn, item))
            except UnknownColumn as error:
                raise SqlError(
                    f"ORDER BY of a UNION, INTERSECT or EXCEPT names its result columns (by name"
                    f" or number); '{error.name}' is not one"
                ) from None
        rows = sort_rows(list(rows), keys)
    constants = Scope(columns=[], params=scope.params, now=scope.now)

    def evaluate(expr: ast.Expr) -> Any:
        return compile_(expr, constants).fn(())

    start = row_count(offset, evaluate, "OFFSET") or 0
    stop = row_count(limit, evaluate, "LIMIT")
    if start:
        rows = rows[start:]
    if stop is not None:
        rows = rows[:stop]
    return QueryOutput(output.columns, rows)


def _position(expr: ast.Expr, names: list[str]) -> int | None:
    if isinstance(expr, ast.Literal) and expr.type == "INT":
        position = int(expr.value)  # type: ignore[call-overload]
        if not 1 <= position <= len(names):
            raise SqlError(f"ORDER BY {position} is not a column of the result")
        return position - 1
    if isinstance(expr, ast.ColumnRef) and expr.name.lower() in names:
        return names.index(expr.name.lower())
    return None
