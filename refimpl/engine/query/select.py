"""SELECT: access path, filtering, grouping, ordering, limits.

The planner reads the WHERE clause for what lets it read less: an equality on every key
column is a point lookup; otherwise equalities and ranges on an index's first columns read
through that index (`index_choice`); a range on the TIMESERIES column and an equality on the
SYMBOL partition column prune partitions. The whole WHERE is still applied to what is read.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from refimpl.engine import admission
from refimpl.engine.query.aggregates import make_accumulator
from refimpl.engine.query.compiled import (
    Compiled,
    OuterLink,
    Scope,
    ScopeColumn,
    SubqueryPlanner,
    comparable,
    refuse_blob,
)
from refimpl.engine.query.expressions import (
    aggregate_calls,
    compile_expression,
    constant_value,
    contains_aggregate,
)
from refimpl.engine.query.index_choice import choose_index
from refimpl.engine.query.relations import Relation, bounded
from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema, period_of
from refimpl.errors import InvalidValue, SqlError, TypeMismatch, UnknownColumn
from refimpl.sql import ast


class RowSource(Protocol):
    """Something a SELECT reads: a table as the reader sees it, or a table function."""

    columns: list[Column]
    qualifier: str | None
    schema: TableSchema | None

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]: ...


@dataclass(slots=True)
class QueryOutput:
    columns: list[Column]
    rows: list[tuple]


def run_select(
    select: ast.Select,
    source: RowSource | None,
    params: Sequence[Any],
    now: int,
    functions: dict[str, Callable[..., Compiled]] | None = None,
    deadline: float | None = None,
    subqueries: SubqueryPlanner | None = None,
    outer: OuterLink | None = None,
) -> QueryOutput:
    """Run a SELECT over `source` (None: a SELECT without FROM); stop at `deadline`.

    `subqueries` plans the subqueries of its expressions; `outer` links it to the query it
    is a subquery of.
    """
    columns = source.columns if source is not None else []
    qualifiers = set()
    if isinstance(source, Relation):
        scope_columns = source.scope_columns
        qualifiers |= source.qualifiers
    else:
        scope_columns = [ScopeColumn(i, c.type, c.name) for i, c in enumerate(columns)]
    # A table with an alias is named by its alias only: `t.b` inside `FROM t AS x` is the
    # column b of an outer query's t.
    if source is not None and source.qualifier:
        qualifiers.add(source.qualifier.lower())
    elif source is not None and source.schema is not None:
        qualifiers.add(source.schema.name.lower())
    scope = Scope(
        columns=scope_columns,
        qualifiers=frozenset(qualifiers),
        params=params,
        now=now,
        functions=functions or {},
        subqueries=subqueries,
        outer=outer,
    )
    if isinstance(source, Relation):
        items = _expand_relation_stars(select.items, source)
    else:
        items = _expand_stars(select.items, columns, qualifiers)
    scope.clause = "WHERE"
    where = compile_expression(select.where, scope) if select.where is not None else None
    if where is not None and where.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"WHERE needs a BOOLEAN condition, not {where.type}")
    if select.where is not None and contains_aggregate(select.where):
        raise SqlError("aggregates are not allowed in WHERE; use HAVING")
    limit, offset = _limits(select, scope)

    if source is None:
        input_rows: Iterator[Sequence[Any]] = iter([()])
    else:
        hints = plan_access(select.where, source.schema, scope) if source.schema else AccessHints()
        input_rows = bounded(source.rows(hints), deadline)
    if where is not None:
        predicate = where.fn
        input_rows = (row for row in input_rows if predicate(row) is True)

    grouped = bool(select.group_by) or any(
        contains_aggregate(e) for e in _aggregate_sites(select, items)
    )
    if grouped:
        time_index = _time_index(source)
        output_columns, rows = _grouped(select, items, scope, input_rows, time_index)
    else:
        output_columns, rows = _plain(select, items, scope, input_rows, limit, offset)
        return QueryOutput(output_columns, rows)
    if select.distinct:
        rows = _distinct(rows)
    rows = rows[offset:] if offset else rows
    if limit is not None:
        rows = rows[:limit]
    return QueryOutput(output_columns, rows)


def _aggregate_sites(select: ast.Select, items: list[ast.SelectItem]) -> list[ast.Expr]:
    sites = [item.expr for item in items]
    if select.having is not None:
        sites.append(select.having)
    sites += [order.expr for order in select.order_by]
    return sites


def _expand_stars(
    items: tuple[ast.SelectItem, ...], columns: list[Column], qualifiers: set[str]
) -> list[ast.SelectItem]:
    expanded: list[ast.SelectItem] = []
    for item in items:
        if isinstance(item.expr, ast.Star):
            star = item.expr
            if star.table is not None and star.table.lower() not in qualifiers:
                raise UnknownColumn(f"{star.table}.*")
            if not columns:
                raise SqlError("SELECT * needs a FROM clause")
            expanded += [ast.SelectItem(ast.ColumnRef(c.name)) for c in columns]
        else:
            expanded.append(item)
    return expanded


def _expand_relation_stars(
    items: tuple[ast.SelectItem, ...], source: Relation
) -> list[ast.SelectItem]:
    expanded: list[ast.SelectItem] = []
    for item in items:
        if isinstance(item.expr, ast.Star):
            expanded += source.star_items(item.expr.table)
        else:
            expanded.append(item)
    return expanded


def _limits(select: ast.Select, scope: Scope) -> tuple[int | None, int]:
    constants = Scope(columns=[], params=scope.params, now=scope.now)

    def count(expr: ast.Expr | None, what: str) -> int | None:
        if expr is None:
            return None
        try:
            value = constant_value(expr, constants)
        except UnknownColumn:
            raise SqlError(f"{what} takes a number or a ? parameter, not a column") from None
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidValue(f"{what} must be a whole number of 0 or more, not {value!r}")
        return value

    return count(select.limit, "LIMIT"), count(select.offset, "OFFSET") or 0


def column_name(item: ast.SelectItem) -> str:
    """A result column's name: its alias, the column's name, the function's, or its text."""
    if item.alias:
        return item.alias
    expr = item.expr
    if isinstance(expr, ast.ColumnRef):
        return expr.name
    if isinstance(expr, ast.FuncCall):
        return expr.name
    if isinstance(expr, ast.Cast) and isinstance(expr.operand, ast.ColumnRef):
        return expr.operand.name
    from refimpl.sql.printer import to_sql

    return to_sql(expr)


def _result_type(compiled: Compiled) -> str:
    refuse_blob(compiled.type, "a query's answer")
    return "STRING" if compiled.type == "NULL" else compiled.type


# -- plain (not grouped) -----------------------------------------------------------------


def _plain(
    select: ast.Select,
    items: list[ast.SelectItem],
    scope: Scope,
    input_rows: Iterator[Sequence[Any]],
    limit: int | None,
    offset: int,
) -> tuple[list[Column], list[tuple]]:
    scope.clause = "the select list"
    compiled = [compile_expression(item.expr, scope) for item in items]
    names = [column_name(item) for item in items]
    output_columns = [Column(n, _result_type(c)) for n, c in zip(names, compiled, strict=True)]
    fns = [c.fn for c in compiled]
    if not select.order_by:
        rows: list[tuple] = []
        wanted = None if limit is None or select.distinct else offset + limit
        project = _projection(items, scope)
        if project is not None and wanted is None:
            rows = [project(row) for row in input_rows]  # plain columns: no per-cell calls
        else:
            for row in input_rows:
                rows.append(tuple(fn(row) for fn in fns))
                if wanted is not None and len(rows) >= wanted:
                    break
        if select.distinct:
            rows = _distinct(rows)
        rows = rows[offset:] if offset else rows
        return output_columns, rows if limit is None else rows[:limit]

    width = len(scope.columns)
    order_fns = []
    for order in select.order_by:
        index = _output_index(order.expr, items, names)
        if index is not None:
            position = width + index
            order_fns.append((lambda row, p=position: row[p], order))
        else:
            source_scope = Scope(
                columns=scope.columns,
                qualifiers=scope.qualifiers,
                params=scope.params,
                now=scope.now,
                functions=scope.functions,
                clause="ORDER BY",
                subqueries=scope.subqueries,
                outer=scope.outer,
            )
            order_fns.append((compile_expression(order.expr, source_scope).fn, order))
    wide_rows = [(*row, *(fn(row) for fn in fns)) for row in input_rows]
    wide_rows = sort_rows(wide_rows, order_fns)
    rows = [tuple(row[width:]) for row in wide_rows]
    if select.distinct:
        rows = _distinct(rows)
    rows = rows[offset:] if offset else rows
    return output_columns, rows if limit is None else rows[:limit]


def _projection(items: list[ast.SelectItem], scope: Scope) -> Callable[[Any], tuple] | None:
    """A fast row -> tuple when every item is a plain column (SELECT *, SELECT a, b)."""
    if not all(isinstance(item.expr, ast.ColumnRef) for item in items):
        return None
    indices = [scope.resolve(item.expr).index for item in items]  # type: ignore[arg-type]
    if indices == list(range(len(scope.columns))):
        return tuple
    if len(indices) == 1:
        only = indices[0]
        return lambda row: (row[only],)
    return operator.itemgetter(*indices)


def _output_index(expr: ast.Expr, items: list[ast.SelectItem], names: list[str]) -> int | None:
    """ORDER BY 2, ORDER BY alias, or ORDER BY an expression of the select list."""
    if isinstance(expr, ast.Literal) and expr.type == "INT":
        position = int(expr.value)  # type: ignore[call-overload]
        if not 1 <= position <= len(items):
            raise SqlError(f"ORDER BY {position} is not a column of the select list")
        return position - 1
    if isinstance(expr, ast.ColumnRef) and expr.table is None:
        lowered = expr.name.lower()
        matches = [i for i, name in enumerate(names) if name.lower() == lowered]
        if matches:
            return matches[0]
    for index, item in enumerate(items):
        if item.expr == expr:
            return index
    return None


def sort_rows(
    rows: list[Any], order_fns: list[tuple[Callable[[Any], Any], ast.OrderItem]]
) -> list[Any]:
    """Sort by ORDER BY items: NULLS LAST ascending and FIRST descending unless told."""
    for fn, order in reversed(order_fns):
        nulls_first = order.nulls_first
        if nulls_first is None:
            nulls_first = order.descending
        # Sorting descending reverses the null flag too, so flip it to keep the asked place.
        null_rank = nulls_first != order.descending

        def key(row: Any, fn: Callable[[Any], Any] = fn, null_rank: bool = null_rank) -> Any:
            value = fn(row)
            if value is None:
                return (not null_rank, 0)
            return (null_rank, value)

        # One sort runs in C without a checkpoint: a long one makes way before it starts.
        if len(rows) > 4096:
            admission.running_long()
        rows.sort(key=key, reverse=order.descending)
    return rows


def _distinct(rows: list[tuple]) -> list[tuple]:
    seen: set[tuple] = set()
    kept = []
    for row in rows:
        marker = tuple((type(v) is float, v) for v in row)
        if marker not in seen:
            seen.add(marker)
            kept.append(row)
    return kept


# -- grouped -----------------------------------------------------------------------------


def _time_index(source: RowSource | None) -> int | None:
    if source is None or source.schema is None or source.schema.timeseries is None:
        return None
    return source.schema.position(source.schema.timeseries)


def _grouped(
    select: ast.Select,
    items: list[ast.SelectItem],
    scope: Scope,
    input_rows: Iterator[Sequence[Any]],
    time_index: int | None,
) -> tuple[list[Column], list[tuple]]:
    aliases = {item.alias.lower(): item.expr for item in items if item.alias}
    group_exprs: list[ast.Expr] = []
    for expr in select.group_by:
        if isinstance(expr, ast.Literal) and expr.type == "INT":
            position = int(expr.value)  # type: ignore[call-overload]
            if not 1 <= position <= len(items):
                raise SqlError(f"GROUP BY {position} is not a column of the select list")
            expr = items[position - 1].expr
        elif isinstance(expr, ast.ColumnRef) and expr.table is None:
            lowered = expr.name.lower()
            is_column = any(c.name.lower() == lowered for c in scope.columns)
            if not is_column and lowered in aliases:
                expr = aliases[lowered]
        if contains_aggregate(expr):
            raise SqlError("aggregates are not allowed in GROUP BY")
        group_exprs.append(expr)
    scope.clause = "GROUP BY"
    key_fns = [compile_expression(e, scope).fn for e in group_exprs]
    key_types = [compile_expression(e, scope).type for e in group_exprs]

    calls: list[ast.FuncCall] = []
    for site in _aggregate_sites(select, items):
        for call in aggregate_calls(site):
            if call not in calls:
                calls.append(call)
    scope.clause = "an aggregate"
    accumulators = [make_accumulator(call, scope, time_index) for call in calls]

    groups: dict[tuple, list[Any]] = {}
    factories = [a.new_state for a in accumulators]
    steps = [a.step for a in accumulators]
    for row in input_rows:
        key = tuple(fn(row) for fn in key_fns)
        states = groups.get(key)
        if states is None:
            states = [factory() for factory in factories]
            groups[key] = states
        for step, state in zip(steps, states, strict=True):
            step(state, row)
    if not groups and not group_exprs:
        groups[()] = [factory() for factory in factories]

    slots: dict[ast.Expr, tuple[int, str]] = {}
    for index, (expr, type_) in enumerate(zip(group_exprs, key_types, strict=True)):
        slots.setdefault(expr, (index, type_))
    base = len(group_exprs)
    for index, accumulator in enumerate(accumulators):
        slots[calls[index]] = (base + index, accumulator.type)
    group_scope = Scope(
        columns=[],
        qualifiers=scope.qualifiers,
        params=scope.params,
        slots=slots,
        now=scope.now,
        functions=scope.functions,
        clause="the select list",
        subqueries=scope.subqueries,
        outer=scope.outer,
    )
    finals = [a.final for a in accumulators]
    group_rows = [
        (*key, *(final(state) for final, state in zip(finals, states, strict=True)))
        for key, states in groups.items()
    ]
    compiled = [_compile_grouped(item.expr, group_scope) for item in items]
    names = [column_name(item) for item in items]
    output_columns = [Column(n, _result_type(c)) for n, c in zip(names, compiled, strict=True)]
    if select.having is not None:
        group_scope.clause = "HAVING"
        having = _compile_grouped(select.having, group_scope).fn
        group_rows = [row for row in group_rows if having(row) is True]
    fns = [c.fn for c in compiled]
    width = len(slots) + 1
    wide = [(*row, *([None] * (width - len(row))), *(fn(row) for fn in fns)) for row in group_rows]
    if select.order_by:
        order_fns = []
        for order in select.order_by:
            index = _output_index(order.expr, items, names)
            if index is not None:
                order_fns.append((lambda row, p=width + index: row[p], order))
            else:
                group_scope.clause = "ORDER BY"
                order_fns.append((_compile_grouped(order.expr, group_scope).fn, order))
        wide = sort_rows(wide, order_fns)
    return output_columns, [tuple(row[width:]) for row in wide]


def _compile_grouped(expr: ast.Expr, scope: Scope) -> Compiled:
    try:
        return compile_expression(expr, scope)
    except UnknownColumn as error:
        raise SqlError(
            f"column '{error.column}' must appear in GROUP BY or be used in an aggregate"
        ) from None


# -- access path -------------------------------------------------------------------------


def conjuncts(expr: ast.Expr | None) -> list[ast.Expr]:
    if expr is None:
        return []
    if isinstance(expr, ast.Binary) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


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
        time_name = schema.timeseries.lower()
        for name, op, value in constraints:
            if name != time_name or not isinstance(value, int):
                continue
            if op in ("=", ">", ">="):
                bound = value + 1 if op == ">" else value
                time_low = bound if time_low is None else max(time_low, bound)
            if op in ("=", "<", "<="):
                bound = value - 1 if op == "<" else value
                time_high = bound if time_high is None else min(time_high, bound)
        if layout.period is not None:
            if time_low is not None:
                low = period_of(time_low, layout.period)
            if time_high is not None:
                high = period_of(time_high, layout.period)
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
    )

