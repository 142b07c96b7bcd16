"""Point reads: a SELECT that names one row by its whole key (or the rows of one value of a
secondary index, every column of the index pinned), planned once per statement.

`SELECT <columns> FROM t WHERE k = ?` (every key column pinned by `=` to a constant or a
parameter, and nothing else) is what a client working row by row sends most. Planning it the
general way (compile each expression, derive access hints, consult the result cache) costs
several times the read itself; a `PointPlan` is made once per statement and table schema
(kept in the database's plan cache), and a run only checks the constants' types and looks
the row up.

A read by the table's key takes no lock while no commit installs (`read_without_lock`):
the state lock's entry and exit cost more than the read itself.

A statement that does not have this exact shape, or constants of another type than the key
column's (which the general path turns into an error or a conversion), gets no plan here and
takes the general path, so both always give the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

_INTEGER, _TEXT = "integer", "text"
_LITERAL_TYPE = {_INTEGER: "INT", _TEXT: "STRING"}


@dataclass(frozen=True, slots=True)
class KeyPart:
    kind: str  # _INTEGER or _TEXT: the Python type a constant must have
    param: int | None  # the parameter's index, or None for a literal
    literal: Any = None


@dataclass(frozen=True, slots=True)
class PointPlan:
    columns: list[Column]
    positions: tuple[int, ...] | None  # the output columns' places in a row; None: all
    key: tuple[KeyPart, ...]
    index: str | None = None  # the secondary index the key is of; None: the table's key
    # A key of one parameter (a point read's usual shape): its index and the type its value
    # must have, for `ident` without its loop.
    _one: tuple[int, type] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.key) == 1 and self.key[0].param is not None:
            kind = int if self.key[0].kind == _INTEGER else str
            object.__setattr__(self, "_one", (self.key[0].param, kind))

    def read(self, table: Table, key: tuple) -> list[tuple]:
        """The projected rows holding `key` (from `ident`), in table order."""
        if self.index is None:
            row = table.get(key)
            if row is None:
                return []
            return [tuple(row) if self.positions is None else self.project(row)]
        index = table.secondary[self.index]
        return [self.project(row) for row in table.rows_of(index.search(key))]

    def ident(self, params: Sequence[Any]) -> tuple | None:
        """The key the constants name, or None when one is not of the key column's type."""
        one = self._one
        if one is not None:
            at, kind = one
            if at < len(params) and type(value := params[at]) is kind:
                return (value,)
            return None  # too few parameters (the general path says so), or another type
        out = []
        for part in self.key:
            if part.param is None:
                value = part.literal
            elif part.param < len(params):
                value = params[part.param]
            else:
                return None  # too few parameters: the general path says so
            if part.kind == _INTEGER:
                if type(value) is not int:
                    return None
            elif type(value) is not str:
                return None
            out.append(value)
        return tuple(out)

    def project(self, row: Sequence[Any]) -> tuple:
        if self.positions is None:
            return tuple(row)
        return tuple(row[p] for p in self.positions)


def point_plan(select: ast.Select, schema: TableSchema, plans: PlanCache) -> PointPlan | None:
    """The point plan of `select` over a table of `schema`, or None (general path); kept in
    the database's `plans` for that schema object."""
    key = (_POINT, select)
    found = plans.get(key, schema)
    if found is not None:
        return found if isinstance(found, PointPlan) else None
    plan = _make_plan(select, schema)
    plans.put(key, schema, plan if plan is not None else _NO_PLAN)
    return plan


# What a statement with no point plan is kept as (so that it is not examined again), and the
# first part of a point plan's key (a statement's general plan is kept under other keys).
_NO_PLAN = "general path"
_POINT = "point read"


def _make_plan(select: ast.Select, schema: TableSchema) -> PointPlan | None:
    source = select.source
    if (
        not isinstance(source, ast.TableSource)
        or select.where is None
        or select.group_by
        or select.having is not None
        or select.order_by
        or select.limit is not None
        or select.offset is not None
        or select.distinct
    ):
        return None
    names = {schema.name.lower()} | ({source.alias.lower()} if source.alias else set())
    columns = {c.name.lower(): (i, c) for i, c in enumerate(schema.columns)}
    out: list[Column] = []
    positions: list[int] = []
    for item in select.items:
        expr = item.expr
        if isinstance(expr, ast.Star) and item.alias is None:
            if expr.table is not None and expr.table.lower() not in names:
                return None
            positions += range(len(schema.columns))
            out += [Column(c.name, c.type) for c in schema.columns]
        elif isinstance(expr, ast.ColumnRef):
            if expr.table is not None and expr.table.lower() not in names:
                return None
            found = columns.get(expr.name.lower())
            if found is None:
                return None
            positions.append(found[0])
            out.append(Column(item.alias or expr.name, found[1].type))
        else:
            return None
    whole = None if positions == list(range(len(schema.columns))) else tuple(positions)
    if schema.key_columns:
        parts = _key_parts(select.where, schema, names, schema.key_columns)
        if parts is not None:
            return PointPlan(out, whole, parts)
    for index in schema.all_indexes():
        parts = _key_parts(select.where, schema, names, index.columns)
        if parts is not None:
            return PointPlan(out, whole, parts, index.name.lower())
    return None


def _key_parts(
    where: ast.Expr, schema: TableSchema, names: set[str], columns: Sequence[str]
) -> tuple[KeyPart, ...] | None:
    terms: list[ast.Expr] = []
    pending = [where]
    while pending:
        term = pending.pop()
        if isinstance(term, ast.Binary) and term.op == "AND":
            pending += [term.left, term.right]
        else:
            terms.append(term)
    key = [name.lower() for name in columns]
    if len(terms) != len(key):
        return None
    pinned: dict[str, KeyPart] = {}
    for term in terms:
        if not isinstance(term, ast.Binary) or term.op != "=":
            return None
        column, constant = term.left, term.right
        if not isinstance(column, ast.ColumnRef):
            column, constant = constant, column
        if not isinstance(column, ast.ColumnRef):
            return None
        if column.table is not None and column.table.lower() not in names:
            return None
        name = column.name.lower()
        if name not in key or name in pinned:
            return None
        column_type = schema.type_of(name)
        if column_type in values.INTEGER_TYPES:
            kind = _INTEGER
        elif column_type in values.TEXT_TYPES:
            kind = _TEXT
        else:
            return None
        if isinstance(constant, ast.Param):
            pinned[name] = KeyPart(kind, constant.index)
        elif isinstance(constant, ast.Literal) and constant.type == _LITERAL_TYPE[kind]:
            pinned[name] = KeyPart(kind, None, constant.value)
        else:
            return None
    return tuple(pinned[name] for name in key)


def read_without_lock(
    database: Database,
    select: ast.Select,
    name: str,
    plans: Callable[[ast.Select, TableSchema, PlanCache], PointPlan | None],
    params: Sequence[Any],
) -> tuple[list[Column], list[tuple]] | None:
    """The columns and rows of `select`, a point read by the key of table `name` (`plans`
    gives its plan, as `point_plan` does), read without the database's state lock while no
    commit installs (`SharedLock.installs`): a dictionary and a block looked up, where the
    lock's entry and exit cost more than the read. None: read it under the lock (no such
    table or plan, a commit was installing, or the read was torn by one)."""
    state = database.state_lock
    seen = state.installs
    if seen & 1:
        return None
    table = database.tables.get(name.lower())
    if table is None:
        return None
    point = plans(select, table.schema, database.plan_cache)
    if point is None or point.index is not None:
        return None
    one = point._one
    if one is not None:  # `point.ident(params)` of a key of one parameter, without its call
        at, kind = one
        if at >= len(params) or type(value := params[at]) is not kind:
            return None
        ident = (value,)
    else:
        found = point.ident(params)
        if found is None:
            return None
        ident = found
    try:
        # `point.read(table, ident)` by the table's key, without its call.
        row = table.get(ident)
        if row is None:
            rows = []
        elif point.positions is None:
            rows = [tuple(row)]
        else:
            rows = [point.project(row)]
    except Exception:  # torn by a commit's install: the lock's read says what is there
        return None
    # Kept only if no commit began installing since `seen`: the row is then one the
    # committed state held, and `applied_lsn` (moved inside the install) already covers
    # it, so that the caller's `wait_visible` shows nothing before it is durable.
    if state.installs != seen:
        return None
    return point.columns, rows
