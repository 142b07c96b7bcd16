"""RETURNING of INSERT, UPDATE and DELETE: the rows a statement wrote (or, for DELETE,
removed), as its RETURNING items compute them over each, in the order they were written.

What a caller may rely on: `returned` answers a query result whose columns are named and
typed as a SELECT of the same items from the table would answer them; `*` is every column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refimpl.engine.query.compiled import Scope
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
from refimpl.engine.query.pg_names import (
    column_name,
    pg_names,
    pg_types,
    pg_typmods,
    typed_column,
)
from refimpl.engine.result import Result, query_result
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import SqlError, UnknownColumn
from refimpl.sql import ast


def returned(
    text: str,
    schema: TableSchema,
    items: tuple[ast.SelectItem, ...],
    rows: Sequence[Sequence[Any]],
    scope: Scope,
) -> Result:
    """The answer of a RETURNING clause over the written `rows` (each a table row), its items
    compiled in `scope` (the table's columns, the statement's parameters, time, functions)."""
    expanded: list[ast.SelectItem] = []
    for item in items:
        if isinstance(item.expr, ast.Star):
            if item.expr.table is not None and item.expr.table.lower() != schema.name.lower():
                raise UnknownColumn(f"{item.expr.table}.*")
            expanded += [ast.SelectItem(ast.ColumnRef(c.name)) for c in schema.columns]
        else:
            expanded.append(item)
    compiled = []
    for item in expanded:
        if contains_aggregate(item.expr):
            raise SqlError("aggregate functions are not allowed in RETURNING")
        compiled.append(compile_expression(item.expr, scope))
    pg_columns = zip(pg_names(expanded), pg_types(expanded), pg_typmods(expanded), strict=True)
    columns = [
        typed_column(column_name(item), "STRING" if c.type == "NULL" else c.type, *pg)
        for item, c, pg in zip(expanded, compiled, pg_columns, strict=True)
    ]
    fns = [c.fn for c in compiled]
    return query_result(text, columns, [tuple(fn(row) for fn in fns) for row in rows])
