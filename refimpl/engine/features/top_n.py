"""Ordered top-N live queries (`offsets=true`): a total order, moves, a re-run in table order.

A subscription with offsets answers `SELECT ... ORDER BY <cols> LIMIT n` in a total order:
its ORDER BY, then the table's key. Between two answers a client gets `moves`, each "delete
at `old_offset` (when not None), then insert `row` at `new_offset` (when not None)", applied
in their order: first the rows that leave the window, from the last to the first, then the
rows that enter it or change (value or place), in the order of their new offsets. Rows that
keep their values and their order among themselves stay where they are, untouched.

When that total order is the order the table keeps its rows in (its sort key, then its key),
a re-run reads the table in that order and stops after the LIMIT's rows: its cost follows
the window (and how many rows the WHERE skips), never the table's size. Any other order
reads and sorts every row the WHERE keeps.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.cache_keys import pinned_value
from refimpl.engine.query.expressions import contains_aggregate
from refimpl.engine.query.prepared_select import prepare_select
from refimpl.engine.query.select import QueryOutput
from refimpl.engine.statements.executor import now_micros
from refimpl.engine.statements.queries import CommittedTable
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.errors import BadRequest
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# Quoted by every refusal of offsets=true.
OFFSETS_RULE = (
    "offsets=true needs an ordered, limited query of the table's rows:"
    " SUBSCRIBE SELECT ... FROM <table with a key> ORDER BY <columns> LIMIT n"
)


@dataclass(frozen=True, slots=True)
class Move:
    """One step of a client's list: delete at `old_offset`, then insert `row` at `new_offset`."""

    old_offset: int | None
    new_offset: int | None
    row: tuple


@dataclass(frozen=True, slots=True)
class TopPlan:
    """How a query with offsets runs: `select` in the total order; `scan`, when not None,
    the same query without ORDER BY, whose rows come in that order when read in table order."""

    select: ast.Select
    scan: ast.Select | None

    @property
    def in_table_order(self) -> bool:
        return self.scan is not None


def top_plan(select: ast.Select, schema: TableSchema) -> TopPlan:
    """The plan of `select` with offsets; a BadRequest quoting the rule when it has none."""
    missing = []
    if not select.order_by:
        missing.append("no ORDER BY")
    if select.limit is None:
        missing.append("no LIMIT")
    if (
        select.group_by
        or select.distinct
        or any(contains_aggregate(item.expr) for item in select.items)
    ):
        missing.append("GROUP BY, DISTINCT or an aggregate (its rows are not the table's)")
    if not schema.key_columns:
        missing.append(
            f"table '{schema.name}' has no PRIMARY KEY or DEDUP KEY to break ties in the order"
        )
    if missing:
        raise BadRequest(f"{OFFSETS_RULE}; this query has {' and '.join(missing)}")
    qualifier = select.source.alias or select.source.name  # type: ignore[union-attr]
    ordered = {_table_column(o.expr, select, schema) for o in select.order_by}
    ties = tuple(
        ast.OrderItem(ast.ColumnRef(name, qualifier))
        for name in schema.key_columns
        if name.lower() not in ordered
    )
    total = dataclasses.replace(select, order_by=select.order_by + ties)
    scan = dataclasses.replace(select, order_by=()) if _table_order(total, schema) else None
    return TopPlan(total, scan)


def _table_column(expr: ast.Expr, select: ast.Select, schema: TableSchema) -> str | None:
    """The table column (lower case) an ORDER BY item sorts by, or None for anything else."""
    if isinstance(expr, ast.ColumnRef) and expr.table is None:
        # ORDER BY a name of the select list sorts by that item (as the engine resolves it).
        for item in select.items:
            name = item.alias or (item.expr.name if isinstance(item.expr, ast.ColumnRef) else None)
            if name is not None and name.lower() == expr.name.lower():
                expr = item.expr
                break
    if isinstance(expr, ast.ColumnRef) and expr.name.lower() in schema.positions:
        return expr.name.lower()
    return None


def _table_order(select: ast.Select, schema: TableSchema) -> bool:
    """True when the table keeps the rows `select` reads in its total order."""
    layout = schema.layout()
    names = [c.name.lower() for c in schema.columns]
    stored = [names[p] for p in (*layout.order_positions, *layout.key_positions)]
    pinned = None
    if layout.symbol_position is not None:
        # Partitions by symbol come one after the other: in order only for one symbol,
        # whose column then orders nothing.
        if pinned_value(schema, select.where, ()) is None:
            return False
        pinned = names[layout.symbol_position]
        stored = [name for name in stored if name != pinned]
    if layout.period is not None and (
        layout.time_position is None or not stored or stored[0] != names[layout.time_position]
    ):
        return False  # time partitions first: in order only when the time sorts first
    wanted = []
    for order in select.order_by:
        if order.descending or order.nulls_first:
            return False
        column = _table_column(order.expr, select, schema)
        if column is None:
            return False
        if column != pinned:
            wanted.append(column)
    return list(dict.fromkeys(wanted)) == list(dict.fromkeys(stored))


class _TableOrder:
    """A committed table as a SELECT source that never reads through a secondary index, so
    its rows come in the table's order (partitions and time bounds keep that order)."""

    def __init__(self, table: Table, alias: str | None) -> None:
        self._inner = CommittedTable(table, alias)
        self.columns = self._inner.columns
        self.qualifier = self._inner.qualifier
        self.schema: TableSchema | None = self._inner.schema

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return self._inner.rows(dataclasses.replace(hints, index=None))


def run_in_table_order(session: StatementContext, plan: TopPlan) -> QueryOutput:
    """The answer of a plan that is `in_table_order`: read in table order, stopped at LIMIT.
    The rows are taken under the state lock and read after it (see `prepare_select`)."""
    assert plan.scan is not None
    source = plan.scan.source
    assert isinstance(source, ast.TableSource)
    database = session.database
    with database.state_lock:
        table = database.committed_table(source.name)
        prepared = prepare_select(
            plan.scan,
            _TableOrder(table, source.alias),
            (),
            now_micros(),
            session.sql_functions(),
            session.deadline(),
            plans=database.plan_cache,
        )
    return prepared.finish()


def moves(old: Mapping[Any, tuple], new: Mapping[Any, tuple]) -> list[Move]:
    """The moves that turn the list `old` into `new` (both identity -> row, in order)."""
    old_ids = list(old)
    new_ids = list(new)
    old_at = {ident: at for at, ident in enumerate(old_ids)}
    kept = [
        (old_at[ident], ident) for ident in new_ids if ident in old_at and old[ident] == new[ident]
    ]
    stay = _increasing(kept)
    result = [
        Move(at, None, old[ident])
        for at, ident in reversed(list(enumerate(old_ids)))
        if ident not in new
    ]
    current = [ident for ident in old_ids if ident in new]
    for at, ident in enumerate(new_ids):
        if ident in stay:
            continue
        old_offset = None
        if ident in old_at:
            old_offset = current.index(ident)
            del current[old_offset]
        # Everything before it in `new` is in place (stayed or placed), in its order.
        new_offset = 0 if at == 0 else current.index(new_ids[at - 1]) + 1
        current.insert(new_offset, ident)
        result.append(Move(old_offset, new_offset, new[ident]))
    return result


def _increasing(pairs: list[tuple[int, Any]]) -> set[Any]:
    """The identities of a longest run of `pairs` whose first items increase."""
    tails: list[int] = []  # tails[k]: the smallest last item of a run of k + 1
    tail_at: list[int] = []  # where in `pairs` that run ends
    before = [-1] * len(pairs)
    for at, (value, _) in enumerate(pairs):
        k = bisect.bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_at.append(at)
        else:
            tails[k] = value
            tail_at[k] = at
        before[at] = tail_at[k - 1] if k else -1
    chosen: set[Any] = set()
    at = tail_at[-1] if tail_at else -1
    while at >= 0:
        chosen.add(pairs[at][1])
        at = before[at]
    return chosen
