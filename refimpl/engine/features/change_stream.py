"""The change stream: a table's committed changes read back from the write-ahead log.

Readers read the log, never the tables, and only up to the durable LSN, so what they see is
exactly what recovery replays. A read stops between transactions (`max_rows`), never inside
one, so resuming after the last LSN read never skips or repeats a row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from refimpl.engine.query.select import column_constraints, conjuncts
from refimpl.engine.result import Column
from refimpl.engine.rights import Right
from refimpl.engine.storage import records
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import InvalidValue, ResultTooLarge, SqlError, UnknownTable
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database

UNBOUNDED_READ_LIMIT = 100_000
META_COLUMNS = (
    Column("lsn", "BIGINT"),
    Column("seq", "INT"),
    Column("committed_at", "TIMESTAMP"),
    Column("op", "STRING"),
    Column("key", "STRING"),
)
_META_NAMES = frozenset(c.name for c in META_COLUMNS)
_key_encoder = msgspec.msgpack.Encoder()


# A change is a tuple: (lsn, seq, committed_at, op, key, *the row on the table's columns);
# the row's values are NULL for a delete or a ddl. On a table with before-images
# (REPLICA IDENTITY FULL) one more item ends it: the row before the change as a tuple, or
# None (an insert or a ddl), or UNLOGGED (logged while the table kept none). The SQL
# source spreads that row over the `old_` columns; the HTTP route makes JSON objects.
Change = tuple[Any, ...]
OP, KEY, ROW = 3, 4, 5


class _Unlogged:
    """The old row of a change logged while its table kept no before-images."""

    def __repr__(self) -> str:
        return "UNLOGGED"


UNLOGGED = _Unlogged()  # where op, key and the row's first value stand in a change


@dataclass(slots=True)
class ChangeBatch:
    changes: list[Change]  # see Change
    next_lsn: int  # where to read on: the last LSN fully read (or the position asked for)
    more: bool  # more is ready now


def delete_key(part: Sequence[Any], ident: Sequence[Any]) -> str:
    """The `key` of a delete: hex of MessagePack `[partition, identity]` (spec: changes)."""
    return _key_encoder.encode([list(part), list(ident)]).hex()


def read_changes(
    database: Database,
    table: str,
    schema: TableSchema,
    after_lsn: int,
    max_rows: int | None,
    *,
    stop_inside: int | None = None,
    unbounded_limit: int | None = UNBOUNDED_READ_LIMIT,
    through_lsn: int | None = None,
) -> ChangeBatch:
    """Changes of `table` committed after `after_lsn`.

    With `max_rows`, whole transactions until about that many rows (a bigger one comes
    whole on its own). `stop_inside` cuts exactly after that many rows (a SQL LIMIT).
    Without either, more than `unbounded_limit` rows is ResultTooLarge. Gone when the log
    no longer holds the position. `through_lsn` stops the read after that LSN.
    """
    changes: list[Change] = []
    next_lsn = after_lsn
    key = table.lower()
    durable = database.log.durable_lsn
    names = schema.column_names
    more = False
    changes_of = _full_changes_of if schema.replica_identity_full else _changes_of
    for lsn, payload in database.log.read(after_lsn):
        if through_lsn is not None and lsn > through_lsn:
            break
        record = records.decode(lsn, payload)
        taken = list(changes_of(record, key, names))
        if max_rows is not None and changes and len(changes) + len(taken) > max_rows:
            more = True
            break
        changes.extend(taken)
        next_lsn = lsn
        if stop_inside is not None and len(changes) >= stop_inside:
            del changes[stop_inside:]
            more = lsn < durable
            break
        if max_rows is not None and len(changes) >= max_rows:
            more = lsn < durable
            break
        if max_rows is None and unbounded_limit is not None and len(changes) > unbounded_limit:
            raise ResultTooLarge(
                f"changes('{table}') holds more than {unbounded_limit} rows after LSN"
                f" {after_lsn}; read in parts with max_rows, as in changes('{table}',"
                f" {after_lsn}, 10000), and go on from the last lsn read"
            )
    return ChangeBatch(changes, next_lsn, more)


def _changes_of(record: records.Record, table_key: str, names: tuple[str, ...]) -> Iterator[Change]:
    seq = 0
    lsn, committed_at = record.lsn, record.committed_at
    empty = (None,) * len(names)
    for entry in record.entries:
        if entry.table is None or entry.table.lower() != table_key:
            continue
        if entry.kind == records.UPSERT:
            columns, rows, _rowids = entry.payload
            shape = _shape(columns, names)
            for row in rows:
                yield (lsn, seq, committed_at, "upsert", None, *(shape(row) if shape else row))
                seq += 1
        elif entry.kind == records.DELETE:
            for part, ident in entry.payload[0]:
                yield (lsn, seq, committed_at, "delete", delete_key(part, ident), *empty)
                seq += 1
        elif entry.kind == records.DDL:
            yield (lsn, seq, committed_at, "ddl", entry.payload[0], *empty)
            seq += 1


def _full_changes_of(
    record: records.Record, table_key: str, names: tuple[str, ...]
) -> Iterator[Change]:
    """As `_changes_of`, each change ended by the row before it (see Change)."""
    seq = 0
    lsn, committed_at = record.lsn, record.committed_at
    empty = (None,) * len(names)
    for entry in record.entries:
        if entry.table is None or entry.table.lower() != table_key:
            continue
        before = entry.before
        old_rows: list[Any] = []
        missing = UNLOGGED if before is None else None
        if before is not None:
            old_shape = _shape(before.columns, names)
            old_rows = [None if r is None else tuple(old_shape(r) if old_shape else r)
                        for r in before.rows]
        if entry.kind == records.UPSERT:
            columns, rows, _rowids = entry.payload
            shape = _shape(columns, names)
            for index, row in enumerate(rows):
                old = old_rows[index] if old_rows else missing
                yield (lsn, seq, committed_at, "upsert", None, *(shape(row) if shape else row), old)
                seq += 1
        elif entry.kind == records.DELETE:
            for index, (part, ident) in enumerate(entry.payload[0]):
                old = old_rows[index] if old_rows else missing
                yield (lsn, seq, committed_at, "delete", delete_key(part, ident), *empty, old)
                seq += 1
        elif entry.kind == records.DDL:
            yield (lsn, seq, committed_at, "ddl", entry.payload[0], *empty, None)
            seq += 1


def old_column_names(schema: TableSchema) -> list[str]:
    """The names of the before-image columns of changes() (spec: changefeeds): `old_<c>`,
    or `old_row_<c>` when a column of the table or of the stream already has that name."""
    taken = {c.name.lower() for c in schema.columns} | set(_META_NAMES)
    return [f"old_row_{c.name}" if f"old_{c.name}".lower() in taken else f"old_{c.name}"
            for c in schema.columns]


def _shape(logged: list[str], names: tuple[str, ...]):  # noqa: ANN202 - None or a mapper
    """How to put a row logged with `logged` columns onto the current ones (None: as is).

    Columns the row did not have (added later) are NULL; dropped ones are left out.
    """
    if len(logged) == len(names) and all(a == b for a, b in zip(logged, names, strict=True)):
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

    def __init__(self, session: StatementContext, source: ast.FunctionSource, select: ast.Select,
                 params: Sequence[Any]) -> None:
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
        session.authorize(Right.READ, table)
        database = session.database
        with database.state_lock:
            committed = database.tables.get(table.lower())
        if committed is None:
            raise UnknownTable(table)
        self.table_schema = committed.schema
        self.columns = stream_columns(committed.schema)
        self.qualifier = source.alias or "changes"
        self._database = database
        self._table = table
        self._after = max(after_lsn, _lsn_floor(select, self.columns, params))
        self._max_rows = max_rows
        self._limit = _pushed_limit(select, params)

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        batch = read_changes(
            self._database, self._table, self.table_schema, self._after, self._max_rows,
            stop_inside=self._limit,
        )
        if not self.table_schema.replica_identity_full:
            return iter(batch.changes)
        empty = (None,) * len(self.table_schema.columns)
        return ((*c[:-1], *(empty if c[-1] is None or c[-1] is UNLOGGED else c[-1]))
                for c in batch.changes)


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
    for name, op, value in column_constraints(select.where, fake, Scope(columns=[],
                                                                         params=params)):
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


def changes_function(session: StatementContext, source: ast.FunctionSource, select: ast.Select,
                     params: Sequence[Any]) -> ChangesSource:
    return ChangesSource(session, source, select, params)
