"""The changefeed options: declared once, each with one rule, applied to `Change` records.

Every option is a row of `FEED_OPTIONS` (its name, how its text is read, its stage);
`parse_feed_options` reads a request's parameters into one `FeedOptions` for every outlet,
and the route table takes the names from there. The rules of `where` and `squash` are
written once, on `Change` records (`filter_change`, `squash_items`, `merge_changes`), and
applied by one function every outlet calls (`apply_options`), whatever it holds beside each
change. A protocol layer reads a page (`change_stream.read_runs`) and hands it here with the
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

import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change, ChangeBatch
from refimpl.engine.features.event_cursor import row_key
from refimpl.engine.query import deadlines
from refimpl.engine.query.cache_keys import deterministic
from refimpl.engine.query.compiled import Scope, table_scope
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
from refimpl.engine.query.select import column_constraints
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import BadRequest, SqlError, SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

ADD, CHANGE, REMOVE, DDL = "add", "change", "remove", "ddl"
_PREFIX = "SELECT * FROM t WHERE "
_key_decoder = msgspec.msgpack.Decoder()
R = TypeVar("R")  # a row, as an outlet holds it
T = TypeVar("T")  # a change, as an outlet holds it


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


# -- the options as a reader names them: one declaration for every outlet ------------------

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")
MAX_SQUASH_SECONDS = 55.0  # as long as an answer may wait (`wait`)


@dataclass(frozen=True, slots=True)
class FeedOption:
    """One changefeed option (spec: changefeeds): its name as a parameter, how its text is
    read into `FeedOptions` fields (BadRequest naming it when wrong), and the stage of the
    pipeline that applies it: `copy` (the table's rows first), `filter`, `squash`, `label`
    (each change's type) or `state` (the `initializing` and `ready` entries)."""

    name: str
    read: Callable[[str, str], dict[str, Any]]  # (name, text) -> the fields it sets
    stage: str


def read_flag(name: str, text: str) -> bool:
    """`true|false` (also 1/0, yes/no) of the parameter `name`; anything else a BadRequest."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise BadRequest(f"the parameter '{name}' must be true or false, not '{text}'")


def _flag_field(field: str) -> Callable[[str, str], dict[str, Any]]:
    return lambda name, text: {field: read_flag(name, text)}


def _read_squash(name: str, text: str) -> dict[str, Any]:
    """`squash`: off for `false`, on for `true`, else the seconds an answer waits to squash
    more (numbers are seconds, as in the document's `squash: n`)."""
    word = text.strip().lower()
    if word == "false":
        return {}
    if word == "true":
        return {"squash": True}
    try:
        seconds = float(word)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_SQUASH_SECONDS:
        raise BadRequest(
            f"the parameter '{name}' must be true, false or a number of seconds above 0 and"
            f" at most {MAX_SQUASH_SECONDS:g}, not '{text}'"
        )
    return {"squash": True, "squash_seconds": seconds}


def _read_where(name: str, text: str) -> dict[str, Any]:
    if not text.strip():
        raise BadRequest(
            f"the parameter '{name}' takes a predicate over the table's columns, as in"
            f" {name}=id = 1"
        )
    return {"where": text}


# In the order a request's parameters are checked: a 400 names the first wrong one.
FEED_OPTIONS: tuple[FeedOption, ...] = (
    FeedOption("squash", _read_squash, "squash"),
    FeedOption("where", _read_where, "filter"),
    FeedOption("types", _flag_field("types"), "label"),
    FeedOption("states", _flag_field("states"), "state"),
    FeedOption("initial", _flag_field("initial"), "copy"),
)
OPTION_NAMES: tuple[str, ...] = tuple(option.name for option in FEED_OPTIONS)


def parse_feed_options(args: Mapping[str, str]) -> FeedOptions:
    """The options among a request's parameters (an absent one is off); BadRequest naming
    the first wrong one. Every outlet that takes options reads them here."""
    fields: dict[str, Any] = {}
    for option in FEED_OPTIONS:
        text = args.get(option.name)
        if text is not None:
            fields.update(option.read(option.name, text))
    return FeedOptions(**fields)


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
        if not deterministic(statement):
            # A change is checked whenever it is read, long after its commit: now() would
            # let one change pass or not by the time of the read.
            raise SqlError(
                "where= cannot use now() or kdb_rev(), whose value changes from one read to "
                "the next; compare with a constant, as in where=ts > '2024-01-01'"
            )
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
    positions = schema.layout().key_positions

    def ident(change: Change) -> Hashable:
        # A table without a key cannot be squashed: its rows have no identity in the stream.
        return change_ident(change, positions) if positions else (change.lsn, change.seq)

    changes = apply_options(
        batch.changes, _itself, _replaced, ident, options, feed_filter, lambda _: schema
    )
    types = [type_of(c) for c in changes] if options.types else None
    return ShapedBatch(changes, types, batch.next_lsn, batch.more, len(batch.changes))


def apply_options(
    items: list[T],
    change_of: Callable[[T], Change | None],
    remade: Callable[[T, Change], T],
    ident: Callable[[T], Hashable],
    options: FeedOptions,
    feed_filter: FeedFilter | None,
    schema_of: Callable[[T], TableSchema],
) -> list[T]:
    """The options' rules on `Change` records, in their order, for every outlet: `items` are
    a run of what the outlet holds (a page, a part of a stream), each with its change
    (`change_of`; None: it passes as it is), `remade(item, change)` the item showing another
    change, `ident` the row it is about (squash), `schema_of` its table's schema (where).
    An option's rule is added here, once: each outlet calls this and nothing else."""
    if feed_filter is not None:
        kept: list[T] = []
        for item in items:
            change = change_of(item)
            if change is None:
                kept.append(item)
                continue
            shown = filter_change(change, schema_of(item), feed_filter)
            if shown is not None:
                kept.append(item if shown is change else remade(item, shown))
        items = kept
    if options.squash:

        def merged(first: T, last: T) -> T | None:
            start, end = change_of(first), change_of(last)
            if start is None or end is None:
                return last
            change = merge_changes(start, end)
            if change is None:
                return None
            return last if change is end else remade(last, change)

        items = squash_items(items, ident, merged)
    return items


def _itself(change: Change) -> Change:
    return change


def _replaced(_: Change, change: Change) -> Change:
    return change


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


class Verdict(enum.Enum):
    """What a filtered feed does with one change (spec: changefeeds, where)."""

    KEEP = "keep"  # shown as it is
    DROP = "drop"  # left out
    ENTERS = "enters"  # the row enters the filter: shown as an insert, with no old row
    LEAVES = "leaves"  # the row leaves it: shown as a delete of its key


def filter_verdict(op: str, new: R | None, old: R | None, matches: Callable[[R], bool]) -> Verdict:
    """The one rule of `where=`, for every outlet whatever it holds a row as: a change of
    a row (`op` "delete", or a row after its change, `new`; never a schema change), with
    the row before it (`old`; None when none is known: an insert, or none was logged). A
    delete without its old row passes (only its key is logged: a reader ignores a key it
    does not hold)."""
    if op == "delete":
        return Verdict.KEEP if old is None or matches(old) else Verdict.DROP
    if new is not None and matches(new):
        return Verdict.ENTERS if old is not None and not matches(old) else Verdict.KEEP
    return Verdict.LEAVES if old is not None and matches(old) else Verdict.DROP


def squash_items(
    items: Iterable[T], ident: Callable[[T], Hashable], merge: Callable[[T, T], T | None]
) -> list[T]:
    """The one rule of `squash`, for every outlet: one item per row (`ident`), in the order
    of each row's last change, made by `merge(first, last)` of its first and last change
    (the same item for a row changed once); None leaves the row out (it was inserted and
    deleted within what is squashed)."""
    kept: dict[Hashable, T] = {}
    first: dict[Hashable, T] = {}
    for item in items:
        key = ident(item)
        if kept.pop(key, None) is None:
            first[key] = item
        kept[key] = item
    merged = (merge(first[key], item) for key, item in kept.items())
    return [item for item in merged if item is not None]


def filter_change(change: Change, schema: TableSchema, feed_filter: FeedFilter) -> Change | None:
    """The change as the filtered feed shows it, or None when it is left out (see above)."""
    op, old = change.op, change.old
    if op == "ddl":
        return change
    if old is UNLOGGED:  # `filter_verdict` without an old row, in one step: a change a row
        return change if op == "delete" or feed_filter.matches(change.row) else None
    verdict = filter_verdict(op, change.row, old, feed_filter.matches)
    if verdict is Verdict.KEEP:
        return change
    if verdict is Verdict.ENTERS:
        return change._replace(old=None)
    if verdict is Verdict.DROP:
        return None
    # It leaves the filter: to this feed a removal of its key.
    assert isinstance(old, tuple)
    empty = (None,) * len(schema.columns)
    return change._replace(op="delete", key=_key_of(schema, old), row=empty)


def _key_of(schema: TableSchema, row: Sequence[Any]) -> str:
    layout = schema.layout()
    return row_key(schema, row, tuple(row[p] for p in layout.key_positions))


def change_ident(change: Change, positions: Sequence[int]) -> Hashable:
    """The row a change is about, for `squash` on every outlet: its key columns (at
    `positions`), or its logged key for a delete; a ddl is its own."""
    if change.op == "ddl":
        return ("ddl", change.lsn, change.seq)
    if change.op == "delete":
        assert change.key is not None
        return tuple(_key_decoder.decode(bytes.fromhex(change.key))[1])
    row = change.row
    return tuple([row[p] for p in positions])


def merge_changes(first: Change, last: Change) -> Change | None:
    """The one merge of `squash`, for every outlet: a row's last change carrying its first
    change's old row; None when the row was inserted and deleted in between."""
    if last.op == "ddl":
        return last
    old = first.old
    if last.op == "delete" and old is None:
        return None  # inserted and deleted within the page
    return last if last.old is old else last._replace(old=old)
