"""The access path of a SELECT over one table: what its WHERE lets a read skip.

An equality on every key column is a point lookup; otherwise equalities and ranges on an
index's first columns read through that index (`index_choice`); a range on the TIMESERIES
column and an equality on the SYMBOL partition column prune partitions; a range on the
column the table's rows are ordered by first (its first key column, or its first ordering
column), when it holds integers or times, bounds the read inside each partition.
"""

from __future__ import annotations

from typing import Any

from refimpl.engine.query.compiled import Compiled, Scope, comparable, conjuncts
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.query.index_choice import choose_index
from refimpl.engine.storage import values
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema, period_of
from refimpl.errors import SqlError
from refimpl.sql import ast


def _column_name(expr: ast.Expr, schema: TableSchema) -> str | None:
    if isinstance(expr, ast.ColumnRef) and expr.name.lower() in schema.positions:
        return expr.name.lower()
    return None


_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def column_constraints(
    where: ast.Expr | None, schema: TableSchema, scope: Scope
) -> list[tuple[str, str, Any]]:
    """(column, op, value) for every `column op constant` conjunct, values as stored."""
    found = []
    for term in conjuncts(where):
        pairs: list[tuple[str, str, ast.Expr]] = []
        if isinstance(term, ast.Binary) and term.op in _FLIP:
            left, right = _column_name(term.left, schema), _column_name(term.right, schema)
            if left and not right:
                pairs.append((left, term.op, term.right))
            elif right and not left:
                pairs.append((right, _FLIP[term.op], term.left))
        elif isinstance(term, ast.Between) and not term.negated:
            name = _column_name(term.operand, schema)
            if name:
                pairs += [(name, ">=", term.low), (name, "<=", term.high)]
        for name, op, expr in pairs:
            value = _constant_for(expr, schema.type_of(name), scope)
            if value is not _NOT_CONSTANT:
                found.append((name, op, value))
    return found


_NOT_CONSTANT = object()


def _constant_for(expr: ast.Expr, column_type: str, scope: Scope) -> Any:
    try:
        # The outer query's values are constants of a subquery run: `id = outer.x` can be a
        # key lookup.
        constants = Scope(columns=[], params=scope.params, now=scope.now, outer=scope.outer)
        compiled = compile_expression(expr, constants)
    except SqlError:
        return _NOT_CONSTANT
    if not compiled.constant:
        return _NOT_CONSTANT
    probe = Compiled(lambda row: None, column_type)
    try:
        comparable(probe, compiled, "WHERE")
        value = compiled.fn(())
        if value is None:
            return _NOT_CONSTANT
        if column_type == "TIMESTAMP" and isinstance(value, str):
            return values.parse_timestamp(value)
        if column_type == "DOUBLE" and isinstance(value, int):
            return float(value)
        if column_type in values.INTEGER_TYPES and isinstance(value, float):
            return value if value.is_integer() else _NOT_CONSTANT
        return value
    except SqlError:
        return _NOT_CONSTANT


def plan_access(where: ast.Expr | None, schema: TableSchema, scope: Scope) -> AccessHints:
    """What the WHERE clause lets a table read skip."""
    constraints = column_constraints(where, schema, scope)
    if not constraints:
        return AccessHints()
    equal = {name: value for name, op, value in constraints if op == "="}
    ident = None
    key = [name.lower() for name in schema.key_columns]
    if key and all(name in equal for name in key):
        ident = tuple(
            int(equal[n]) if schema.type_of(n) in values.INTEGER_TYPES else equal[n] for n in key
        )
    low = high = None
    time_low = time_high = None
    layout = schema.layout()
    if schema.timeseries:
        time_low, time_high = _integer_bounds(constraints, schema.timeseries.lower())
        if layout.period is not None:
            if time_low is not None:
                low = period_of(time_low, layout.period)
            if time_high is not None:
                high = period_of(time_high, layout.period)
    lead_low = lead_high = None
    if layout.lead_position is not None:
        lead = schema.columns[layout.lead_position]
        if lead.type in values.INTEGER_TYPES or lead.type == "TIMESTAMP":
            lead_low, lead_high = _integer_bounds(constraints, lead.name.lower())
    symbol = None
    if schema.partition_symbol and schema.partition_symbol.lower() in equal:
        value = equal[schema.partition_symbol.lower()]
        if isinstance(value, str):
            symbol = (False, value)
    return AccessHints(
        ident=ident,
        low_period=low,
        high_period=high,
        symbol=symbol,
        time_low=time_low,
        time_high=time_high,
        index=choose_index(constraints, schema) if ident is None else None,
        lead_low=lead_low,
        lead_high=lead_high,
    )


def _integer_bounds(
    constraints: list[tuple[str, str, Any]], column: str
) -> tuple[int | None, int | None]:
    """The inclusive bounds the integer constants of `constraints` put on `column`."""
    low = high = None
    for name, op, value in constraints:
        if name != column or not isinstance(value, int) or isinstance(value, bool):
            continue
        if op in ("=", ">", ">="):
            bound = value + 1 if op == ">" else value
            low = bound if low is None else max(low, bound)
        if op in ("=", "<", "<="):
            bound = value - 1 if op == "<" else value
            high = bound if high is None else min(high, bound)
    return low, high
