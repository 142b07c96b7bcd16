"""A long VALUES list of constants loaded as an import is: its rows taken and converted
before any lock, then installed by the context's `load_rows` (`Database.load_rows`) in a
short step, so that other writers' commits go on meanwhile (spec: sql.md, INSERT).

Only an INSERT outside a transaction, of at least `BULK_VALUES_ROWS` rows whose values are
all literals or parameters, without RETURNING, goes this way; any other, and any that the
load refuses (triggers, indexes, a key already held or given twice, a NULL where none may
be, a value that does not convert), runs the ordinary way, which reports its errors.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from refimpl.engine import admission
from refimpl.engine.statements.context import StatementContext
from refimpl.engine.storage import bulk, values
from refimpl.errors import KdbError, StatementTimeout, UnknownTable
from refimpl.sql import ast

# Fewer rows than this gain nothing from the two short lock steps of a load.
BULK_VALUES_ROWS = 1_000
# Rows converted between two looks at the clock and at other requests waiting.
_CHECK_ROWS = 4096


def load_values(
    context: StatementContext, statement: ast.Insert, params: Sequence[Any]
) -> int | None:
    """The rows inserted when `statement` loaded as an import does; None when it does not
    go this way (nothing changed: run it the ordinary way). The caller has checked the
    right to write the table. StatementTimeout when converting its rows takes too long."""
    rows = statement.rows
    if (
        rows is None
        or len(rows) < BULK_VALUES_ROWS
        or statement.returning
        or context.transaction is not None
    ):
        return None
    database = context.database
    try:
        table = database.committed_table(statement.table)
    except UnknownTable:  # a view, say: the ordinary way says what it is
        return None
    if not bulk.takes_loads(table, database.settings):
        return None  # decided before converting: the ordinary way would convert them again
    schema = table.schema
    width = len(schema.columns)
    if statement.columns is None:
        positions = list(range(width))
    else:
        if not all(name.lower() in schema.positions for name in statement.columns):
            return None
        positions = [schema.position(name) for name in statement.columns]
    if len(set(positions)) != len(positions) or any(len(row) != len(positions) for row in rows):
        return None
    targets = [(p, schema.columns[p].type, schema.columns[p].name) for p in positions]
    loaded = values.TypedRows(
        (column.type for column in schema.columns),
        columns=(column.name for column in schema.columns),
    )
    coerce = values.coerce
    deadline = context.deadline()
    try:
        for number, row in enumerate(rows, start=1):
            if not number % _CHECK_ROWS:
                admission.running_long()  # a long VALUES list makes way for others
                if time.monotonic() > deadline:
                    raise StatementTimeout.ran_too_long()
            slots: list[Any] = [None] * width
            for (position, kind, name), expr in zip(targets, row, strict=True):
                given = _constant(expr, params)
                if given is _NOT_CONSTANT:
                    return None
                slots[position] = coerce(given, kind, name)
            loaded.append(tuple(slots))
    except StatementTimeout:
        raise
    except KdbError:
        return None
    return context.load_rows(statement.table, loaded)


_NOT_CONSTANT = object()


def _constant(expr: ast.Expr, params: Sequence[Any]) -> Any:
    """The value of a literal, a parameter given, or one of them negated when a number
    (the session's statement templates make `-1.5` a negated parameter) and, an integer,
    within BIGINT both before and after; else `_NOT_CONSTANT`."""
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.Param):
        return params[expr.index] if expr.index < len(params) else _NOT_CONSTANT
    if isinstance(expr, ast.Unary) and expr.op == "-":
        value = _constant(expr.operand, params)
        # An integer past BIGINT before or after its sign is taken is an error the ordinary
        # way (its operand is checked, then its result): that way says so.
        if type(value) is int and -values.BIGINT_MAX <= value <= values.BIGINT_MAX:
            return -value
        if type(value) is float:
            return -value
    return _NOT_CONSTANT
