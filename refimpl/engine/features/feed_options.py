"""Changefeed options over a page of the change stream: filtered feeds, squashing, types.

A protocol layer reads a page (`change_stream.read_changes`) and hands it here with the
options the reader asked for (spec: changefeeds). What a caller may rely on:

- `FeedFilter.compile` checks a `where=` predicate over the table's columns: a predicate
  that does not parse is SqlSyntaxError placed in the predicate's own text, an unknown column
  UnknownColumn, an aggregate SqlError; nothing is read before it passes. A predicate that
  pins one row by its whole key is a point feed (`FeedFilter.point`);
- `shape_changes` keeps the page's transactions whole and in order (its `next_lsn` stays
  where to go on); it only drops, merges or relabels changes, and says each one's `type`;
- on a table with before-images (REPLICA IDENTITY FULL) a filtered feed is exact: a row
  that leaves the filter comes as a `delete` of its key (type `remove`, `old_row` the row
  before), one that enters it as type `add`. Without before-images, upserts are checked on
  their new row only and every delete passes (the log keeps only its key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change, ChangeBatch
from refimpl.engine.features.event_stream import row_key
from refimpl.engine.query import deadlines
from refimpl.engine.query.compiled import Scope, table_scope
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
from refimpl.engine.query.select import column_constraints
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import SqlError, SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

ADD, CHANGE, REMOVE, DDL = "add", "change", "remove", "ddl"
_PREFIX = "SELECT * FROM t WHERE "
_key_decoder = msgspec.msgpack.Decoder()


@dataclass(frozen=True, slots=True)
class FeedOptions:
    """What a reader asked for beyond the plain stream (all off by default)."""

    types: bool = False
    states: bool = False
    squash: bool = False
    where: str | None = None
    initial: bool = False
    squash_seconds: float = 0.0  # with squash: how long an answer waits to squash more

    @property
    def plain(self) -> bool:
        return not (
            self.types or self.states or self.squash or self.where is not None or self.initial
        )


@dataclass(frozen=True, slots=True)
class PointKey:
    """The one row a point feed names (`where=id = 1`): its identity and hex key."""

    ident: tuple[Any, ...]
    key: str


@dataclass(frozen=True, slots=True)
class FeedFilter:
    """A compiled `where=` predicate over a table's rows; `point` when it pins one row (its
    conjuncts give every key column, and what places the row in a partition, a constant)."""

    text: str
    test: Callable[[Sequence[Any]], Any]
    point: PointKey | None = None

    @classmethod
    def compile(cls, schema: TableSchema, text: str) -> FeedFilter:
        try:
            script = parse_cached(_PREFIX + text)
        except SqlSyntaxError as error:
            raise _in_predicate(error) from None
        statement = script.statements[0] if len(script.statements) == 1 else None
        if (
            not isinstance(statement, ast.Select)
            or statement.where is None
            or (statement.order_by or statement.limit is not None or statement.group_by)
        ):
            raise SqlError(
                "where= takes one predicate over the table's columns, as in where=id = 1"
            )
        if contains_aggregate(statement.where):
            raise SqlError("where= cannot use an aggregate: it is checked against one row")
        compiled = compile_expression(statement.where, table_scope(schema, (), "where="))
        return cls(text, compiled.fn, _point_key(schema, statement.where))

    def matches(self, row: Sequence[Any] | None) -> bool:
        """Whether `row` passes; StatementTimeout past the running work's deadline."""
        deadlines.check()  # a page of large rows must stop between rows too
        return row is not None and self.test(row) is True


def _point_key(schema: TableSchema, where: ast.Expr) -> PointKey | None:
    layout = schema.layout()
    if not layout.key_positions:
        return None
    pinned = {
        name: value
        for name, op, value in column_constraints(where, schema, Scope(columns=[], params=()))
        if op == "="
    }
    row: list[Any] = [None] * len(schema.columns)
    timed = layout.time_position if layout.period is not None else None
    needed = [*layout.key_positions, timed, layout.symbol_position]
    for position in needed:
        if position is None:
            continue
        name = schema.columns[position].name.lower()
        if name not in pinned:
            return None
        row[position] = pinned[name]
    ident = tuple(row[p] for p in layout.key_positions)
    return PointKey(ident, row_key(schema, row, ident))


def _in_predicate(error: SqlSyntaxError) -> SqlSyntaxError:
    """The parser's error placed in the predicate's own text (line 1, column from 1)."""
    message = str(error)
    line, column = error.line, error.column
    if line == 1 and column is not None:
        column = max(1, column - len(_PREFIX))
        head = message.split(": ", 1)[-1] if message.startswith("line ") else message
        message = f"line 1, column {column}: {head}"
    return SqlSyntaxError(f"where= does not parse: {message}", line, column)


@dataclass(slots=True)
class ShapedBatch:
    """A page after the options: its changes, their types (None when not asked), and where
    to go on (the page's, unchanged)."""

    changes: list[Change]
    types: list[str] | None
    next_lsn: int
    more: bool
    read: int  # changes read from the log for it (before filtering and squashing)


def shape_changes(
    batch: ChangeBatch, schema: TableSchema, options: FeedOptions, feed_filter: FeedFilter | None
) -> ShapedBatch:
    """The page's changes with the options applied (see the module docstring)."""
    changes = batch.changes
    if feed_filter is not None:
        changes = [
            c for c in (filter_change(c, schema, feed_filter) for c in changes) if c is not None
        ]
    if options.squash:
        changes = _squashed(changes, schema)
    types = [type_of(c) for c in changes] if options.types else None
    return ShapedBatch(changes, types, batch.next_lsn, batch.more, len(batch.changes))


def type_of(change: Change) -> str:
    """`add`, `change`, `remove` or `ddl` (spec: changefeeds, types)."""
    op = change.op
    if op == "delete":
        return REMOVE
    if op == "ddl":
        return DDL
    if change.old is None:
        return ADD
    return CHANGE  # without a before-image the log cannot tell an insert from an update


def filter_change(change: Change, schema: TableSchema, feed_filter: FeedFilter) -> Change | None:
    """The change as the filtered feed shows it, or None when it is left out (see above)."""
    op, old = change.op, change.old
    if op == "ddl":
        return change
    if op == "delete":
        if old is UNLOGGED:
            return change
        return change if feed_filter.matches(old) else None
    if feed_filter.matches(change.row):
        if old is not UNLOGGED and old is not None and not feed_filter.matches(old):
            return change._replace(old=None)  # it enters the filter: an add
        return change
    if old is UNLOGGED or old is None or not feed_filter.matches(old):
        return None
    # It leaves the filter: to this feed a removal of its key.
    empty = (None,) * len(schema.columns)
    return change._replace(op="delete", key=_key_of(schema, old), row=empty)


def _key_of(schema: TableSchema, row: Sequence[Any]) -> str:
    layout = schema.layout()
    return row_key(schema, row, tuple(row[p] for p in layout.key_positions))


def _ident(change: Change, schema: TableSchema) -> Any:
    """The row a change is about: its key columns, or its logged key for a delete."""
    if change.op == "delete":
        assert change.key is not None
        return tuple(_key_decoder.decode(bytes.fromhex(change.key))[1])
    positions = schema.layout().key_positions
    return tuple(change.row[p] for p in positions)


def _squashed(changes: list[Change], schema: TableSchema) -> list[Change]:
    """One change per row: the latest, carrying the first old row; a row inserted and
    deleted within the page disappears. A table without a key cannot be squashed: its rows
    have no identity in the stream."""
    if not schema.layout().key_positions:
        return changes
    kept: dict[Any, Change] = {}  # in the order of each row's last change
    first_old: dict[Any, Any] = {}
    for change in changes:
        if change.op == "ddl":
            ident: Any = ("ddl", change.lsn, change.seq)
        else:
            ident = _ident(change, schema)
        if kept.pop(ident, None) is None:
            first_old[ident] = change.old
        kept[ident] = change
    result = []
    for ident, change in kept.items():
        if change.op != "ddl":
            old = first_old[ident]
            if change.op == "delete" and old is None:
                continue  # inserted and deleted within the page
            change = change._replace(old=old)
        result.append(change)
    return result
