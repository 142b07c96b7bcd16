"""The change stream: a table's committed changes read back from the write-ahead log.

Readers read the log, never the tables, and only up to the durable LSN, so what they see is
exactly what recovery replays. A read stops between transactions (`max_rows`), never inside
one, so resuming after the last LSN read never skips or repeats a row. `read_runs` gives a
page as runs of the log's entries (`ChangeRun`), its `change_batch()` as one `Change` record
a change, the one shape every outlet reads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count, repeat
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import msgspec

from refimpl.engine.features.recent_records import LogRecords
from refimpl.engine.query.select import column_constraints, conjuncts
from refimpl.engine.result import Column
from refimpl.engine.rights import READ
from refimpl.engine.storage import records
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import InvalidValue, ResultTooLarge, SqlError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database

UNBOUNDED_READ_LIMIT = 100_000
# Rows one C-level step (a map, an encode) takes at once. Such a call holds the interpreter
# lock from its start to its end, and every other thread (a writer's commit, a request that
# takes no lock) waits for it: 1,000 rows take well under a millisecond.
CHUNK_ROWS = 1000
META_COLUMNS = (
    Column("lsn", "BIGINT"),
    Column("seq", "INT"),
    Column("committed_at", "TIMESTAMP"),
    Column("op", "STRING"),
    Column("key", "STRING"),
)
_META_NAMES = frozenset(c.name for c in META_COLUMNS)
_key_encoder = msgspec.msgpack.Encoder()
T = TypeVar("T")


class _Unlogged(enum.Enum):
    """The old row of a change logged while its table kept no before-images (an enum's one
    member, so that `old is UNLOGGED` tells the type checker what `old` is otherwise)."""

    UNLOGGED = "UNLOGGED"

    def __repr__(self) -> str:
        return "UNLOGGED"


UNLOGGED: Final = _Unlogged.UNLOGGED
OldRow = tuple[Any, ...] | None | _Unlogged  # see Change.old


class Change(NamedTuple):
    """One committed change of one table, as every outlet reads it (`changes()`,
    `/api/changes`, `/stream/changes`, an initial copy, the PostgreSQL protocol, logical
    replication's slots).

    Made where the log is decoded (`ChangeRun.changes`) and by an initial copy (op
    `initial`); outlets read its fields by name and never change it (`_replace` makes the
    variant a filter or a squash shows).

    A named tuple rather than a frozen slotted dataclass, on purpose: it is as immutable and
    has no per-instance dict either, but a page of them is made by C-level maps
    (`tuple.__new__`, see `ChangeRun.changes`), with no Python step a change, which a
    dataclass's `__init__` cannot be. Measured side by side (100,000 changes, medians of 9,
    load about 13 on 2 cores): made 1.6x faster, `_replace` 2.2x faster than
    `dataclasses.replace`, read by name alike (1.1x); 96 bytes against 88. End to end
    (`tools/bench/versions.py --only http,stream`, this code against the same code with
    `@dataclass(frozen=True, slots=True)`, 5 rounds, 50,000 changes, load average 12.5 to
    16 on 2 cores): a shaped `/api/changes` read (`where`, `squash`, `types`, pages of
    1,000) cost the server 1.04x the CPU per row with the dataclass (rounds 0.96x to 1.07x)
    at 0.95x the rows/s; 50 event streams at 20 commits/s, 0.90x the server's CPU per
    commit (rounds 0.90x to 1.00x; 40 commits in 10 ms clock ticks, so to about 10%). A
    plain read, which makes no record, varied 0.77x to 1.04x between rounds of the same
    run: the dataclass is within that noise, but not shown within 3%. A logical slot,
    which makes a record of every row it sends, shows the cost plainly: a walsender's CPU
    to decode and encode 100,000 rows in transactions of 1,000 (medians of 3 runs of 5
    passes each, process CPU time) is 1.32x with the dataclass for pgoutput (0.31 s
    against 0.24 s) and 1.21x for test_decoding (0.57 s against 0.47 s). So the record
    stays a named tuple. No reader indexes it: its fields are read by name everywhere.
    """

    lsn: int  # the LSN of the transaction that committed it (an initial copy's page's)
    seq: int  # its place in that transaction, from 0 (in the page, for an initial copy)
    committed_at: int | None  # the commit's time in microseconds; None for an initial row
    op: str  # "upsert", "delete", "ddl", or "initial" for a row of an initial copy
    # A delete's or an initial row's hex key (`delete_key`, `row_key`); a ddl's statement
    # text; None for an upsert (its key follows from its row).
    key: str | None
    # On the table's columns, as the log's decoder made it (a list or a tuple: read, never
    # changed); every value NULL for a delete or a ddl.
    row: Sequence[Any]
    # The row before the change on a table with before-images (REPLICA IDENTITY FULL):
    # a tuple, None (an insert, a ddl, an initial row), or UNLOGGED (logged while the
    # table kept none, and always on a table that keeps none).
    old: OldRow = UNLOGGED


_new = tuple.__new__


@dataclass(slots=True)
class ChangeBatch:
    changes: list[Change]  # see Change
    next_lsn: int  # where to read on: the last LSN fully read (or the position asked for)
    more: bool  # more is ready now


@dataclass(slots=True)
class ChangeRun:
    """Changes of one kind that follow each other in one transaction, as the log holds them
    (an entry of its record): no object per change, so that an encoder makes a run's objects
    by C-level maps, with no Python step per row."""

    lsn: int
    committed_at: int
    seq: int  # the first change's; the others follow it
    op: str  # "upsert", "delete" or "ddl"
    items: Sequence[Any]  # upsert: each row, on the table's columns; delete: each key; ddl: [text]
    width: int  # the table's columns: a delete's or a ddl's row is that many NULLs
    # On a table with before-images, each change's row before it (see Change); else None.
    old_rows: Sequence[Any] | None = None

    def changes(self) -> Iterator[Change]:
        """The run's changes as `Change` records."""
        lsn, committed_at, op, items = self.lsn, self.committed_at, self.op, self.items
        if len(items) == 1:  # most runs (a one-row commit's): no maps to set up
            old = UNLOGGED if self.old_rows is None else self.old_rows[0]
            if op == "upsert":
                one = (lsn, self.seq, committed_at, op, None, items[0], old)
            else:
                one = (lsn, self.seq, committed_at, op, items[0], (None,) * self.width, old)
            return iter((_new(Change, one),))
        olds: Iterable[OldRow] = repeat(UNLOGGED) if self.old_rows is None else self.old_rows
        head = (repeat(lsn), count(self.seq), repeat(committed_at), repeat(op))
        if op == "upsert":
            fields = zip(*head, repeat(None), items, olds)
        else:
            fields = zip(*head, items, repeat((None,) * self.width), olds)
        # Made by C-level maps, with no Python step a change: tuple.__new__ makes each
        # record of its fields without the named tuple's own (Python) __new__.
        return map(_new, repeat(Change), fields)

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The run's changes as rows of `changes()` (see `Change.flat`), made with no
        `Change` in between: a SQL read of the stream makes one tuple per change."""
        lsn, committed_at, op = self.lsn, self.committed_at, self.op
        if op == "upsert":
            made = (
                (lsn, seq, committed_at, op, None, *row)
                for seq, row in zip(count(self.seq), self.items)
            )
        else:
            empty = (None,) * self.width
            made = (
                (lsn, seq, committed_at, op, key, *empty)
                for seq, key in zip(count(self.seq), self.items)
            )
        if self.old_rows is None:
            return made
        empty = (None,) * self.width
        return (
            (*row, *(empty if old is None or old is UNLOGGED else old))
            for row, old in zip(made, self.old_rows, strict=True)
        )


@dataclass(slots=True)
class RunBatch:
    """A page of the change stream as runs (see ChangeRun); `next_lsn` and `more` as in
    ChangeBatch."""

    runs: list[ChangeRun]
    next_lsn: int
    more: bool

    def changes(self) -> list[Change]:
        return [change for run in self.runs for change in run.changes()]

    def change_batch(self) -> ChangeBatch:
        """The same page as one `Change` record a change."""
        return ChangeBatch(self.changes(), self.next_lsn, self.more)


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` in slices of `CHUNK_ROWS`: a C-level step over each lets other threads run
    between them (see CHUNK_ROWS)."""
    return (items[start : start + CHUNK_ROWS] for start in range(0, len(items), CHUNK_ROWS))


def delete_key(part: Sequence[Any], ident: Sequence[Any]) -> str:
    """The `key` of a delete: hex of MessagePack `[partition, identity]` (spec: changes)."""
    return _key_encoder.encode([list(part), list(ident)]).hex()


def read_runs(
    database: Database,
    table: str,
    schema: TableSchema,
    after_lsn: int,
    max_rows: int | None,
    *,
    stop_inside: int | None = None,
    unbounded_limit: int | None = UNBOUNDED_READ_LIMIT,
    through_lsn: int | None = None,
) -> RunBatch:
    """Changes of `table` committed after `after_lsn`.

    With `max_rows`, whole transactions until about that many rows (a bigger one comes
    whole on its own). `stop_inside` cuts exactly after that many rows (a SQL LIMIT).
    Without either, more than `unbounded_limit` rows is ResultTooLarge. Gone when the log
    no longer holds the position. `through_lsn` stops the read after that LSN.
    """
    end = PageEnd(after_lsn)
    taken = page_records(
        database,
        table,
        schema,
        after_lsn,
        max_rows,
        end,
        stop_inside=stop_inside,
        unbounded_limit=unbounded_limit,
        through_lsn=through_lsn,
    )
    runs = [run for record_runs in taken for run in record_runs]
    return RunBatch(runs, end.next_lsn, end.more)


@dataclass(slots=True)
class PageEnd:
    """Where a page's read of the log ended (`RunBatch.next_lsn` and `more`): told by
    `page_records` once its iteration is over, not before."""

    next_lsn: int
    more: bool = False


def page_records(
    database: Database,
    table: str,
    schema: TableSchema,
    after_lsn: int,
    max_rows: int | None,
    end: PageEnd,
    *,
    stop_inside: int | None = None,
    unbounded_limit: int | None = UNBOUNDED_READ_LIMIT,
    through_lsn: int | None = None,
) -> Generator[list[ChangeRun], None, None]:
    """The runs `read_runs` gives (its arguments mean the same), a log record's at a time
    as each is read and decoded; at the end of the iteration `end` says where the page
    ended. Run it to its end or close it (it holds the log's file open meanwhile)."""
    count = 0
    next_lsn = after_lsn
    key = table.lower()
    durable = database.log.durable_lsn
    names = schema.column_names
    full = schema.replica_identity_full
    more = False
    log_records = LogRecords(database.log, after_lsn)  # a page read ahead comes from memory
    try:
        for lsn, payload in log_records:
            if through_lsn is not None and lsn > through_lsn:
                break
            taken = _runs_of(records.decode(lsn, payload), key, names, full)
            rows = sum(len(run.items) for run in taken)
            if max_rows is not None and count and count + rows > max_rows:
                more = True
                break
            count += rows
            next_lsn = lsn
            # Where a record ends the page, its runs are given before the read stops.
            if stop_inside is not None and count >= stop_inside:
                _cut(taken, count - stop_inside)  # within this record: before it, fewer
                more = lsn < durable
            elif max_rows is not None and count >= max_rows:
                more = lsn < durable
            elif max_rows is None and unbounded_limit is not None and count > unbounded_limit:
                raise ResultTooLarge(
                    f"changes('{table}') holds more than {unbounded_limit} rows after LSN"
                    f" {after_lsn}; read in parts with max_rows, as in changes('{table}',"
                    f" {after_lsn}, 10000), and go on from the last lsn read"
                )
            else:
                yield taken
                continue
            yield taken
            break
        if more:
            log_records.read_ahead()  # the next page starts where this one stopped
    finally:
        log_records.close()
    end.next_lsn, end.more = next_lsn, more


class RunPieces:
    """A plain page of the change stream (`read_runs` with `max_rows`), read as it is used:
    iterating it gives its runs a piece at a time, each piece whole log records of
    CHUNK_ROWS changes or more (the last may hold fewer), read and decoded from the log as
    the iteration goes on. A reader that makes each piece's answer and lets the piece go
    holds one piece's objects at a time, not the page's: fewer fresh pages of memory and
    a warm cache (measured in process, 10,000-row pages read and encoded as JSON: 0.8x
    the CPU per row of the whole page read first). Iterate it once, to its end; then
    `next_lsn`, `more` and `rows` are the page's (as `read_runs` would have answered)."""

    __slots__ = ("_records", "_end", "rows")

    def __init__(
        self, database: Database, table: str, schema: TableSchema, after_lsn: int, max_rows: int
    ) -> None:
        self._end = PageEnd(after_lsn)
        self._records = page_records(database, table, schema, after_lsn, max_rows, self._end)
        self.rows = 0  # the changes given so far

    @property
    def next_lsn(self) -> int:
        return self._end.next_lsn

    @property
    def more(self) -> bool:
        return self._end.more

    def __iter__(self) -> Iterator[list[ChangeRun]]:
        piece: list[ChangeRun] = []
        size = 0
        try:
            for taken in self._records:
                piece += taken
                size += sum(len(run.items) for run in taken)
                if size >= CHUNK_ROWS:
                    self.rows += size
                    yield piece
                    piece, size = [], 0
            if piece:
                self.rows += size
                yield piece
        finally:
            self._records.close()  # the log's file, also when the reader stopped early


def _cut(runs: list[ChangeRun], extra: int) -> None:
    """Drops the last `extra` changes of `runs`."""
    while extra:
        last = runs[-1]
        if len(last.items) <= extra:
            extra -= len(runs.pop().items)
            continue
        keep = len(last.items) - extra
        last.items = last.items[:keep]
        if last.old_rows is not None:
            last.old_rows = last.old_rows[:keep]
        return


def _runs_of(
    record: records.Record, table_key: str, names: tuple[str, ...], full: bool
) -> list[ChangeRun]:
    """The record's changes of the table, a run per entry; before-images only when `full`."""
    runs: list[ChangeRun] = []
    seq = 0
    for entry in record.entries:
        if entry.table is None or entry.table.lower() != table_key:
            continue
        run = entry_run(record, entry, names, full, seq)
        if run is not None:
            runs.append(run)
            seq += len(run.items)
    return runs


def entry_run(
    record: records.Record, entry: records.Entry, names: tuple[str, ...], full: bool, seq: int
) -> ChangeRun | None:
    """One entry of a log record as a run of changes on a table's columns `names` (its
    first change at `seq`); before-images only when `full`. None for an entry that changes
    no row of a table (or an empty one). Every outlet's changes are made here."""
    if entry.kind == records.UPSERT:
        columns, items, _rowids = entry.payload
        shape = row_mapper(columns, names)
        if shape is not None:
            items = [shape(row) for row in items]
        op = "upsert"
    elif entry.kind == records.DELETE:
        items = [delete_key(part, ident) for part, ident in entry.payload[0]]
        op = "delete"
    elif entry.kind == records.DDL:
        items, op = [entry.payload[0]], "ddl"
    else:
        return None
    if not items:
        return None
    old_rows = _old_rows(entry, names, len(items)) if full else None
    return ChangeRun(record.lsn, record.committed_at, seq, op, items, len(names), old_rows)


def _old_rows(entry: records.Entry, names: tuple[str, ...], count: int) -> list[Any]:
    """The row before each change of the entry, as tuples on the table's columns (None for
    an insert or a ddl; UNLOGGED when the entry was logged without them)."""
    if entry.kind == records.DDL:
        return [None]
    before = entry.before
    if before is None:
        return [UNLOGGED] * count
    shape = row_mapper(before.columns, names)
    return [None if row is None else tuple(shape(row) if shape else row) for row in before.rows]


def old_column_names(schema: TableSchema) -> list[str]:
    """The names of the before-image columns of changes() (spec: changefeeds): `old_<c>`,
    or `old_row_<c>` when a column of the table or of the stream already has that name."""
    taken = {c.name.lower() for c in schema.columns} | set(_META_NAMES)
    return [
        f"old_row_{c.name}" if f"old_{c.name}".lower() in taken else f"old_{c.name}"
        for c in schema.columns
    ]


def row_mapper(
    logged: Sequence[str], names: tuple[str, ...]
) -> Callable[[Sequence[Any]], tuple] | None:
    """How to put a row logged with `logged` columns onto the current ones (None: as is).

    Columns the row did not have (added later) are NULL; dropped ones are left out.
    """
    if tuple(logged) == names:  # one C comparison: a record's columns are mostly the table's
        return None
    where = {name.lower(): index for index, name in enumerate(logged)}
    positions = [where.get(name.lower()) for name in names]
    return lambda row: tuple(None if p is None else row[p] for p in positions)


# -- SELECT ... FROM changes('t' [, after_lsn [, max_rows]]) ------------------------------


def stream_columns(schema: TableSchema) -> list[Column]:
    """The columns of changes(): the five stream columns, then the table's (renamed on clash)."""
    table_columns = [
        Column(f"row_{c.name}" if c.name.lower() in _META_NAMES else c.name, c.type)
        for c in schema.columns
    ]
    if schema.replica_identity_full:
        old = old_column_names(schema)
        table_columns += [Column(n, c.type) for n, c in zip(old, schema.columns, strict=True)]
    return [*META_COLUMNS, *table_columns]


class ChangesSource:
    """`changes(...)` as a SELECT source; LSN bounds and a plain LIMIT are pushed down."""

    schema = None

    def __init__(
        self,
        session: StatementContext,
        source: ast.FunctionSource,
        select: ast.Select,
        params: Sequence[Any],
    ) -> None:
        from refimpl.engine.query.compiled import Scope
        from refimpl.engine.query.expressions import constant_value

        scope = Scope(columns=[], params=params)
        arguments = [constant_value(a, scope) for a in source.args]
        if not 1 <= len(arguments) <= 3:
            raise SqlError("changes() takes a table name, then optionally after_lsn and max_rows")
        table, after_lsn, max_rows = (*arguments, None, None)[:3]
        if not isinstance(table, str):
            raise InvalidValue("changes() takes the table's name as text, as in changes('t')")
        after_lsn = _whole(after_lsn, "after_lsn") or 0
        max_rows = _whole(max_rows, "max_rows")
        if max_rows == 0:
            raise InvalidValue("max_rows must be 1 or more")
        session.authorize(READ, table)
        database = session.database
        with database.state_lock:
            committed = database.committed_table(table)
        self.table_schema = committed.schema
        self.columns = stream_columns(committed.schema)
        self.qualifier = source.alias or "changes"
        self._database = database
        self._table = table
        self._after = max(after_lsn, _lsn_floor(select, self.columns, params))
        self._max_rows = max_rows
        self._limit = _pushed_limit(select, params)

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        batch = read_runs(
            self._database,
            self._table,
            self.table_schema,
            self._after,
            self._max_rows,
            stop_inside=self._limit,
        )
        return (row for run in batch.runs for row in run.rows())


def _whole(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidValue(f"{what} must be a whole number of 0 or more, not {value!r}")
    return value


def _lsn_floor(select: ast.Select, columns: list[Column], params: Sequence[Any]) -> int:
    """The largest x of `WHERE lsn > x` / `lsn >= x+1` conjuncts (pushed into the read)."""
    from refimpl.engine.query.compiled import Scope

    fake = TableSchema("changes", tuple(ast.ColumnDef(c.name, c.type) for c in columns))
    floor = 0
    for name, op, value in column_constraints(select.where, fake, Scope(columns=[], params=params)):
        if name != "lsn" or not isinstance(value, int):
            continue
        if op == ">":
            floor = max(floor, value)
        elif op in (">=", "="):
            floor = max(floor, value - 1)
    return floor


def _pushed_limit(select: ast.Select, params: Sequence[Any]) -> int | None:
    """A plain LIMIT (no WHERE beyond LSN bounds, ORDER BY, grouping or DISTINCT) read exactly."""
    if select.limit is None or select.order_by or select.group_by or select.distinct:
        return None
    if select.having is not None:
        return None
    for term in conjuncts(select.where):
        if not _is_lsn_bound(term):
            return None
    from refimpl.engine.query.compiled import Scope
    from refimpl.engine.query.expressions import constant_value, contains_aggregate

    if any(contains_aggregate(item.expr) for item in select.items):
        return None
    scope = Scope(columns=[], params=params)
    limit = constant_value(select.limit, scope)
    offset = constant_value(select.offset, scope) if select.offset is not None else 0
    if not isinstance(limit, int) or not isinstance(offset, int):
        return None
    return limit + offset


def _is_lsn_bound(term: ast.Expr) -> bool:
    return (
        isinstance(term, ast.Binary)
        and term.op in (">", ">=", "=")
        and isinstance(term.left, ast.ColumnRef)
        and term.left.name.lower() == "lsn"
    )


def changes_function(
    session: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> ChangesSource:
    return ChangesSource(session, source, select, params)
