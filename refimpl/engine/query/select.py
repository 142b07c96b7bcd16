"""SELECT: a statement compiled into a `SelectPlan` (access path, filtering, grouping,
ordering, limits), and the plan run over a source.

The access path (`access_path`) reads the WHERE clause for what lets a read skip rows; the
whole WHERE is still applied to what is read. A plan holds nothing of one run, so the
database's `PlanCache` keeps it for the next run of the same statement over the same schema.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# The access path lives in its own module; its names are still the planner's to callers.
from refimpl.engine.query.access_path import column_constraints as column_constraints
from refimpl.engine.query.access_path import conjuncts as conjuncts
from refimpl.engine.query.access_path import plan_access as plan_access
from refimpl.engine.query.aggregates import make_accumulator
from refimpl.engine.query.compiled import (
    Compiled,
    Evaluator,
    OuterLink,
    Scope,
    ScopeColumn,
    SubqueryPlanner,
    refuse_blob,
    row_count,
)
from refimpl.engine.query.expressions import (
    compile_expression,
    constant_value,
    contains_aggregate,
    distinct_aggregate_calls,
)
from refimpl.engine.query.functions import CLOCK_FUNCTIONS
from refimpl.engine.query.names import canonical
from refimpl.engine.query.ordering import OrderFn, OrderFns, first_rows, sort_rows
from refimpl.engine.query.pg_names import column_name as column_name
from refimpl.engine.query.pg_names import pg_names, pg_types, pg_typmods, typed_column
from refimpl.engine.query.relations import Relation, bounded
from refimpl.engine.query.set_returning import SET_RETURNING
from refimpl.engine.query.windows import expanded, needs_relation
from refimpl.engine.result import Column
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import SqlError, TypeMismatch, UnknownColumn
from refimpl.sql import ast


class RowSource(Protocol):
    """Something a SELECT reads: a table as the reader sees it, or a table function."""

    # Read-only members: a source may keep them as attributes, properties or class values.
    @property
    def columns(self) -> list[Column]: ...

    @property
    def qualifier(self) -> str | None: ...

    @property
    def schema(self) -> TableSchema | None: ...

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]: ...


@dataclass(slots=True)
class QueryOutput:
    columns: list[Column]
    rows: list[tuple]


# What a plan makes of the rows its WHERE let through: the answer's columns and rows.
Finish = Callable[[Iterator[Sequence[Any]]], tuple[list[Column], list[tuple]]]


@dataclass(frozen=True, slots=True)
class SelectPlan:
    """A SELECT compiled for one source shape and one set of typed parameters: what to read,
    which rows pass, and how they become the answer. It holds nothing of a run (no rows, no
    rights, no deadline), so one plan serves every run of its key, in several threads."""

    hints: AccessHints | None  # None: a SELECT without FROM reads one empty row
    predicate: Evaluator | None
    finish: Finish
    reads: bool = True  # False: LIMIT 0, whose finish reads no row

    def run(self, source: RowSource | None, deadline: float | None) -> QueryOutput:
        return QueryOutput(*self.finish(self._kept(source, deadline)))

    def _kept(self, source: RowSource | None, deadline: float | None) -> Iterator[Sequence[Any]]:
        if source is None or self.hints is None:
            input_rows: Iterator[Sequence[Any]] = iter([()])
        else:
            input_rows = bounded(source.rows(self.hints), deadline)
        predicate = self.predicate
        if predicate is not None:
            input_rows = (row for row in input_rows if predicate(row) is True)
        return input_rows


def run_select(
    select: ast.Select,
    source: RowSource | None,
    params: Sequence[Any],
    now: int,
    functions: Mapping[str, Callable[..., Compiled]] | None = None,
    deadline: float | None = None,
    subqueries: SubqueryPlanner | None = None,
    outer: OuterLink | None = None,
    plans: PlanCache | None = None,
) -> QueryOutput:
    """Run a SELECT over `source` (None: a SELECT without FROM); stop at `deadline`.

    `subqueries` plans the subqueries of its expressions; `outer` links it to the query it
    is a subquery of. With `plans` (the database's), a plan made before for the same
    statement, source schema and typed parameters is run instead of compiling again.
    """
    if needs_relation(select):  # row_number() OVER, unnest() in the select list: see windows
        scope = Scope([], params=params, now=now, functions=functions or {})
        scope.subqueries, scope.outer = subqueries, outer
        select, source = expanded(select, source, scope)
    key = None
    if plans is not None and outer is None:
        key = plan_key(select, source, params, functions)
    if plans is None or key is None:
        plan = compile_select(select, source, params, now, functions, subqueries, outer)
        return plan.run(source, deadline)
    version = None if source is None else source.schema
    found = plans.get(key, version)
    if isinstance(found, SelectPlan):
        return found.run(source, deadline)
    plan = compile_select(select, source, params, now, functions, subqueries, outer)
    plans.put(key, version, plan)
    return plan.run(source, deadline)


def plan_key(
    select: ast.Select,
    source: RowSource | None,
    params: Sequence[Any],
    functions: Mapping[str, Callable[..., Compiled]] | None,
) -> Hashable | None:
    """The key a SELECT's plan is kept under, or None when its plan may not be reused: it
    has subqueries (their plans read the run's rights), calls now() (compiled to the run's
    moment) or a function of the caller's session, or reads a source without a schema (a
    join, a view's rows, a table function) whose columns no schema object versions.

    Parameters are part of the key with their types: a plan compiles their values in (a
    text constant next to a TIMESTAMP is read as a time once, a LIKE pattern is made once,
    and the WHERE's bounds choose the partitions read)."""
    if source is not None and (source.schema is None or isinstance(source, Relation)):
        return None
    reads = _reads(select)
    if reads is None or (functions and not reads.isdisjoint(functions)):
        return None
    try:
        key = (
            select,
            None if source is None else source.qualifier,
            tuple((type(p), p) for p in params),
        )
        hash(key)
    except TypeError:
        return None
    return key


@functools.lru_cache(maxsize=4096)
def _reads(select: ast.Select) -> frozenset[str] | None:
    """The names of the functions `select` calls; None when it has a subquery or calls
    now() (or CURRENT_TIMESTAMP, ...: CLOCK_FUNCTIONS) or a set-returning function (its
    source is then a relation of its own)."""
    names = set()
    for node in ast.walk(select):
        if isinstance(node, _SUBQUERY_NODES):
            return None
        if isinstance(node, ast.FuncCall):
            names.add(node.name)
    if any(isinstance(node, ast.WindowCall) for node in ast.walk(select)):
        return None
    if not names.isdisjoint(CLOCK_FUNCTIONS) or not names.isdisjoint(SET_RETURNING):
        return None
    return frozenset(names)


_SUBQUERY_NODES = (
    ast.ScalarSubquery,
    ast.Exists,
    ast.InSubquery,
    ast.Quantified,
    ast.ArraySubquery,
)


def compile_select(
    select: ast.Select,
    source: RowSource | None,
    params: Sequence[Any],
    now: int,
    functions: Mapping[str, Callable[..., Compiled]] | None = None,
    subqueries: SubqueryPlanner | None = None,
    outer: OuterLink | None = None,
) -> SelectPlan:
    """The plan of a SELECT over a source of `source`'s shape; raises what the statement
    gets wrong (names, types, limits) before any row is read."""
    columns = source.columns if source is not None else []
    qualifiers: set[str] = set()
    if isinstance(source, Relation):
        scope_columns = source.scope_columns
        qualifiers |= source.qualifiers
    else:
        scope_columns = [
            ScopeColumn(i, c.type, c.name, None, False, c.pg_type, c.pg_typmod)
            for i, c in enumerate(columns)
        ]
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
    hints = None
    if source is not None:
        hints = plan_access(select.where, source.schema, scope) if source.schema else AccessHints()
    grouped = bool(select.group_by) or any(
        contains_aggregate(e) for e in _aggregate_sites(select, items)
    )
    if grouped:
        finish = _grouped(select, items, scope, _time_index(source), limit, offset)
    else:
        finish = _plain(select, items, scope, limit, offset)
    if limit == 0:
        # LIMIT 0 reads and computes nothing (as PostgreSQL): no row's error can surface.
        whole = finish
        finish = lambda rows: whole(iter(()))  # noqa: E731 - the plan's finish, emptied
    return SelectPlan(hints, None if where is None else where.fn, finish, limit != 0)


def _trimmed(rows: list[tuple], distinct: bool, limit: int | None, offset: int) -> list[tuple]:
    """The answer's rows after DISTINCT, OFFSET and LIMIT."""
    if distinct:
        rows = _distinct(rows)
    rows = rows[offset:] if offset else rows
    return rows if limit is None else rows[:limit]


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

    def evaluate(expr: ast.Expr) -> Any:
        return constant_value(expr, constants)

    limit = row_count(select.limit, evaluate, "LIMIT")
    return limit, row_count(select.offset, evaluate, "OFFSET") or 0


def _result_type(compiled: Compiled) -> str:
    refuse_blob(compiled.type, "a query's answer")
    return "STRING" if compiled.type == "NULL" else compiled.type


# -- plain (not grouped) -----------------------------------------------------------------


def _plain(
    select: ast.Select,
    items: list[ast.SelectItem],
    scope: Scope,
    limit: int | None,
    offset: int,
) -> Finish:
    scope.clause = "the select list"
    compiled = [compile_expression(item.expr, scope) for item in items]
    names = [column_name(item) for item in items]
    types = [_result_type(c) for c in compiled]
    pg_columns = zip(pg_names(items), pg_types(items, scope), pg_typmods(items, scope), strict=True)
    output_columns = [
        typed_column(n, type_, *pg) for n, type_, pg in zip(names, types, pg_columns, strict=True)
    ]
    fns = [c.fn for c in compiled]
    distinct = select.distinct

    if not select.order_by:
        wanted = None if limit is None or distinct else offset + limit
        project = _projection(items, scope)

        def unordered(input_rows: Iterator[Sequence[Any]]) -> tuple[list[Column], list[tuple]]:
            rows: list[tuple] = []
            if project is not None and wanted is None:
                rows = [project(row) for row in input_rows]  # plain columns: no per-cell calls
            else:
                for row in input_rows:
                    rows.append(tuple(fn(row) for fn in fns))
                    if wanted is not None and len(rows) >= wanted:
                        break
            return output_columns, _trimmed(rows, distinct, limit, offset)

        return unordered

    width = len(scope.columns)
    order_fns: list[OrderFn] = []
    # With plain columns only, ORDER BY reads the source row: the columns of the rows kept
    # by a LIMIT are then the only ones picked (`top`).
    plain = _column_indices(items, scope)
    top: list[OrderFn] | None = [] if plain and limit is not None and not distinct else None
    for order in select.order_by:
        index = _output_index(order.expr, items, names)
        if index is not None:
            order_fns.append((operator.itemgetter(width + index), order))
            if top is not None and plain is not None:
                top.append((operator.itemgetter(plain[index]), order))
        else:
            source_scope = dataclasses.replace(scope, clause="ORDER BY", slots={})
            order_fns.append((compile_expression(order.expr, source_scope).fn, order))
            if top is not None:
                top.append(order_fns[-1])
    project = _projection(items, scope)

    def ordered(input_rows: Iterator[Sequence[Any]]) -> tuple[list[Column], list[tuple]]:
        if top is not None and project is not None and limit is not None:
            kept = first_rows(list(input_rows), top, offset + limit)[offset:]
            return output_columns, [project(row) for row in kept]
        wide_rows = [(*row, *(fn(row) for fn in fns)) for row in input_rows]
        wide_rows, start = _ordered(wide_rows, order_fns, distinct, limit, offset)
        rows = [tuple(row[width:]) for row in wide_rows]
        return output_columns, _trimmed(rows, distinct, limit, start)

    return ordered


def _column_indices(items: list[ast.SelectItem], scope: Scope) -> list[int] | None:
    """The source columns of a select list of plain columns (SELECT *, SELECT a, b); None
    when an item is anything else."""
    if not all(isinstance(item.expr, ast.ColumnRef) for item in items):
        return None
    return [scope.resolve(item.expr).index for item in items]  # type: ignore[arg-type]


def _projection(items: list[ast.SelectItem], scope: Scope) -> Callable[[Any], tuple] | None:
    """A fast row -> tuple when every item is a plain column (SELECT *, SELECT a, b)."""
    indices = _column_indices(items, scope)
    if indices is None:
        return None
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


def _ordered(
    rows: list[tuple], order_fns: OrderFns, distinct: bool, limit: int | None, offset: int
) -> tuple[list[tuple], int]:
    """The rows in ORDER BY's order, and the OFFSET still to skip in them: with a LIMIT (and
    no DISTINCT, which may drop any of them), only the rows up to the LIMIT's last, offset
    skipped (ORDER BY ... LIMIT n costs O(N log n), not a sort of every row)."""
    if limit is None or distinct:
        return sort_rows(rows, order_fns), offset
    return first_rows(rows, order_fns, offset + limit)[offset:], 0


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
    time_index: int | None,
    limit: int | None,
    offset: int,
) -> Finish:
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
        group_exprs.append(canonical(expr, scope))
    # Every clause spells each column one way, so `t.a` in the select list is the `a` that
    # GROUP BY names (the trees are compared, not the text).
    names = [column_name(item) for item in items]
    written = items
    items = [ast.SelectItem(canonical(item.expr, scope), item.alias) for item in items]
    having_expr = None if select.having is None else canonical(select.having, scope)
    orders = [dataclasses.replace(o, expr=canonical(o.expr, scope)) for o in select.order_by]
    scope.clause = "GROUP BY"
    group_keys = [compile_expression(e, scope) for e in group_exprs]
    key_fns = [key.fn for key in group_keys]
    key_types = [key.type for key in group_keys]

    sites = [item.expr for item in items] + [o.expr for o in orders]
    calls = distinct_aggregate_calls([*sites, having_expr])
    scope.clause = "an aggregate"
    accumulators = [make_accumulator(call, scope, time_index) for call in calls]
    factories = [a.new_state for a in accumulators]
    steps = [a.step for a in accumulators]
    finals = [a.final for a in accumulators]

    # The answer's expressions read the groups' rows: the keys, then the aggregates' values.
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
    compiled = [_compile_grouped(item.expr, group_scope) for item in items]
    types = [_result_type(c) for c in compiled]
    # Of the items as written, once compiled: a scalar subquery's type is what it answered.
    pg_columns = zip(
        pg_names(written), pg_types(written, scope), pg_typmods(written, scope), strict=True
    )
    output_columns = [
        typed_column(n, type_, *pg) for n, type_, pg in zip(names, types, pg_columns, strict=True)
    ]
    having = None
    if having_expr is not None:
        group_scope.clause = "HAVING"
        having = _compile_grouped(having_expr, group_scope).fn
    fns = [c.fn for c in compiled]
    width = len(slots) + 1
    order_fns: list[tuple[Callable[[Any], Any], ast.OrderItem]] = []
    for order in orders:
        output_index = _output_index(order.expr, items, names)
        if output_index is not None:
            order_fns.append((operator.itemgetter(width + output_index), order))
        else:
            group_scope.clause = "ORDER BY"
            order_fns.append((_compile_grouped(order.expr, group_scope).fn, order))
    whole_table = not group_exprs
    distinct = select.distinct

    def finish(input_rows: Iterator[Sequence[Any]]) -> tuple[list[Column], list[tuple]]:
        groups: dict[tuple, list[Any]] = {}
        for row in input_rows:
            key = tuple(fn(row) for fn in key_fns)
            states = groups.get(key)
            if states is None:
                states = [factory() for factory in factories]
                groups[key] = states
            for step, state in zip(steps, states, strict=True):
                step(state, row)
        if not groups and whole_table:
            groups[()] = [factory() for factory in factories]
        group_rows = [
            (*key, *(final(state) for final, state in zip(finals, states, strict=True)))
            for key, states in groups.items()
        ]
        if having is not None:
            group_rows = [row for row in group_rows if having(row) is True]
        wide = [
            (*row, *([None] * (width - len(row))), *(fn(row) for fn in fns)) for row in group_rows
        ]
        start = offset
        if order_fns:
            wide, start = _ordered(wide, order_fns, distinct, limit, offset)
        rows = [tuple(row[width:]) for row in wide]
        return output_columns, _trimmed(rows, distinct, limit, start)

    return finish


def _compile_grouped(expr: ast.Expr, scope: Scope) -> Compiled:
    try:
        return compile_expression(expr, scope)
    except UnknownColumn as error:
        raise SqlError(
            f"column '{error.name}' must appear in GROUP BY or be used in an aggregate"
        ) from None
