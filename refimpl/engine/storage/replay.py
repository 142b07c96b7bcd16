"""Log replay: logged changes applied to committed tables, one entry at a time
(`apply_entry`) or a whole log at a time (`Replay`, what recovery uses).

A recovery after a crash replays every record after the latest checkpoint: up to a
checkpoint's worth of log (`checkpoint_mb`), 132,000 single-row commits in the default 8 MB,
more for a larger setting. Replayed an entry at a time, each record costs its objects (`Record`,
`Entry`) and each row a sorted insert of its own. `Replay` takes the records of a run of the
log together (`Replay.run`), reads each one's entries as decoded lists, and keeps each
table's upserted rows in a batch, one row per identity, the last (what a row-by-row replay
leaves), which goes into the table at once when it is big, before any schema change, and at
the end (a batch of keys all after the table's last, as inserts in key order make, is added
as whole blocks: `Table.load_rows`, `Table.install_prepared`; any other by
`Table.put_many`):

- a delete is applied to the table at once and takes its identities out of the batch, so
  the row it deletes is gone whether it was put before the batch or in it; the row id
  counter of a table without key moves past a row's id when the row enters the batch;
- a schema change (a DDL entry) first puts every batch, since it may replace, drop or
  reshape its table; a change of the database itself (settings, views, routines) touches
  no table and is applied in its place.

So the tables equal, row for row (identities, partitions, secondary indexes, row id
counters), what `apply_entry` of every entry in turn leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from refimpl.engine.storage import ddl, records, values
from refimpl.engine.storage.records import Entry
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Ident, OrderIndex, Row, Table
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.errors import CorruptLog, InvalidValue, SqlError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

# Rows a replay keeps in its batches before it puts them: bounds its memory, while a
# batch of this many costs the table one merge or a run of cheap inserts.
_BATCH_ROWS = 65_536
# How rows as a record holds them (lists, on the columns it names) become a table's rows.
Shape = Callable[[Sequence[Sequence[Any]]], list[Row]]


def apply_database_change(settings: dict[str, Any], text: str) -> None:
    """Apply one logged change of the database itself (ALTER DATABASE ... SET, a view, a
    routine) to its settings."""
    statement = parse_cached(text).statements[0]
    if isinstance(statement, ast.CreateView | ast.DropView):
        ddl.apply_view_change(settings, statement)
        return
    if isinstance(statement, ddl.ROUTINE_CHANGES):
        ddl.apply_routine_change(settings, statement)
        return
    if not isinstance(statement, ast.AlterDatabaseSet):
        raise InvalidValue(f"unexpected database change in the log: {text}")
    settings[statement.setting] = values.parse_size(statement.value)


def apply_entry(tables: dict[str, Table], settings: dict[str, Any], entry: Entry) -> None:
    """Apply one logged entry to committed tables (recovery, and replicas of the state)."""
    if entry.kind == records.DATABASE:
        apply_database_change(settings, entry.payload[0])
        return
    if entry.kind == records.DDL:
        ddl.apply_logged_ddl(tables, parse_cached(entry.payload[0]).statements[0])
        return
    assert entry.table is not None  # only database and DDL entries name no table
    table = tables[entry.table.lower()]
    if entry.kind == records.DELETE:
        for _part, ident in entry.payload[0]:
            table.delete(tuple(ident))
        return
    columns, rows, rowids = entry.payload
    shaped = _shaper(table.schema, columns)(rows)
    if rowids is None:
        for row in shaped:
            table.put(table.ident_of(row), row)
    else:
        for row, rowid in zip(shaped, rowids, strict=True):
            table.put((rowid,), row)


# What a record that does not fit the tables raises as it is applied: KeyError for a table
# the log never created, SqlError or ValueError for a value, TypeError for a value of
# another type than its column's (met when the row is placed).
ERRORS = (SqlError, KeyError, ValueError, TypeError)


class Unreplayable(Exception):
    """A record of a run that cannot apply: its place in the run (None when it is not known:
    a batch of rows of earlier records failed as it went into its table), and why (one of
    `ERRORS`)."""

    def __init__(self, index: int | None, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class _Batch:
    """A table's rows upserted since its last put: identity -> its last row."""

    __slots__ = ("table", "rows", "name", "columns", "shape", "ident_of")

    def __init__(self, table: Table) -> None:
        self.table = table
        self.name = table.schema.name  # as the last upsert's entry named it (any case)
        self.rows: dict[Ident, Row] = {}
        # The column list of the last upsert and how rows written with it are shaped into
        # the table's: every record of a table usually names the same columns.
        self.columns: list[str] | None = None
        self.shape: Shape = _as_tuples
        self.ident_of = _ident_getter(table)


class Replay:
    """Applies the records of a log, in LSN order, to `tables` and `settings`, a batch at a
    time (see the module docstring). `flush()` after the last record: only then do the
    tables hold everything replayed."""

    def __init__(self, tables: dict[str, Table], settings: dict[str, Any]) -> None:
        self.tables = tables
        self.settings = settings
        self._batches: dict[str, _Batch] = {}
        self._held = 0  # rows in the batches or more, duplicates counted (see `run`)
        self._touched: set[str] = set()  # keys of tables whose rows changed
        self._reshaped = False  # a schema change came: any table may be another now
        self._last: _Batch | None = None  # the batch of the last upsert, until a flush

    def changed(self, key: str) -> bool:
        """Whether the table of this (lower-case) key may differ from what it was before
        the replay: its rows changed, or a schema change came."""
        return self._reshaped or key in self._touched

    def run(self, payloads: Sequence[bytes | memoryview]) -> None:
        """Apply consecutive records, in LSN order (each payload its own object, as the
        log's reads give them). Raises `Unreplayable` (which names the record by its place
        in `payloads`) when one cannot apply; the tables may then hold part of the run.

        A record that upserts one row of the table, on the columns, of the record before
        (a run of single-row INSERTs) takes a short way: the row goes into its batch with
        no call of its own. Every other record goes through `_apply`.
        """
        if self._held + len(payloads) >= _BATCH_ROWS:
            self._flush_batches()
        # Counted ahead, one row a record (the short way's), so that it counts no row one
        # by one; a record the long way goes also counts its rows there (`_held` is then
        # over, never under, what the batches hold).
        self._held += len(payloads)
        decode = records.raw_decoder()
        name: str | None = None  # the short way's table, as the log names it; None: none
        columns: list[str] = []
        pending: dict[Ident, Row] = {}
        key = 0  # the table's one key column; -1: identities by `pick`; -2: logged row ids
        pick: Callable[[Row], Ident] = tuple  # set with key -1
        table: Table | None = None
        payload: bytes | memoryview = b""
        try:
            for payload in payloads:
                entries = decode(payload)[1]
                if len(entries) == 1:
                    raw = entries[0]
                    if raw[1] == name and raw[0] == "u" and raw[2] == columns and len(raw) == 5:
                        rows = raw[3]
                        if len(rows) == 1:
                            row = tuple(rows[0])
                            if key >= 0:
                                pending[(row[key],)] = row
                            elif key == -1:
                                pending[pick(row)] = row
                            else:
                                assert table is not None
                                (rowid,) = raw[4]
                                pending[(rowid,)] = row
                                if rowid >= table.next_rowid:  # as `_upsert`
                                    table.next_rowid = rowid + 1
                            continue
                self._apply(entries)
                if self._held >= _BATCH_ROWS:
                    self._flush_batches()
                last = self._last
                if last is None or last.shape is not _as_tuples or last.columns is None:
                    name = None
                    continue
                name, columns, pending, table = last.name, last.columns, last.rows, last.table
                positions = table.layout.key_positions
                if not table.keyed:
                    key = -2
                elif len(positions) == 1:
                    key = positions[0]
                else:
                    key, pick = -1, itemgetter(*positions)
        except ERRORS as error:
            # Found by identity only now: a count kept per record would cost every record.
            index = next(i for i, one in enumerate(payloads) if one is payload)
            raise Unreplayable(index, error) from error

    def _apply(self, entries: list[list[Any]]) -> None:
        """Apply the entries of one record."""
        for raw in entries:
            kind = raw[0]
            if kind == records.UPSERT:
                self._upsert(raw[1], raw[2], raw[3], raw[4])
            elif kind == records.DELETE:
                self._delete(raw[1], raw[2])
            elif kind == records.DDL:
                self._flush_batches()
                self._reshaped = True
                apply_entry(self.tables, self.settings, records.entry_of(raw))
            else:
                apply_entry(self.tables, self.settings, records.entry_of(raw))

    def _flush_batches(self) -> None:
        """`flush`, in the middle of a run: a batch that cannot go into its table raises
        `Unreplayable` naming no record (its rows came from records before)."""
        try:
            self.flush()
        except ERRORS as error:
            raise Unreplayable(None, error) from error

    def flush(self) -> None:
        """Put every batch into its table (raises one of `ERRORS` when one cannot go)."""
        batches, self._batches, self._held, self._last = self._batches, {}, 0, None
        for batch in batches.values():
            if batch.rows:
                _put(batch.table, batch.rows)

    def _batch(self, name: str) -> _Batch:
        key = name.lower()
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch(self.tables[key])
            self._touched.add(key)
        return batch

    def _upsert(
        self, name: str, columns: list[str], rows: list[list[Any]], rowids: list[int] | None
    ) -> None:
        batch = self._batch(name)
        if columns != batch.columns:
            batch.columns, batch.shape = columns, _shaper(batch.table.schema, columns)
        batch.name, self._last = name, batch
        if rowids:
            # At once, as a put would: a row deleted before its batch is put still used
            # its id, which no later row may get again.
            batch.table.next_rowid = max(batch.table.next_rowid, max(rowids) + 1)
        if len(rows) == 1 and batch.shape is _as_tuples:
            # A one-row commit's, the commonest record: no lists or zips made for it.
            row = tuple(rows[0])
            batch.rows[batch.ident_of(row) if rowids is None else (rowids[0],)] = row
            self._held += 1
            return
        shaped = batch.shape(rows)
        if rowids is None:
            batch.rows.update(zip(map(batch.ident_of, shaped), shaped, strict=True))
        else:
            batch.rows.update(zip(zip(rowids), shaped, strict=True))
        self._held += len(shaped)

    def _delete(self, name: str, keys: list[list[Any]]) -> None:
        batch = self._batch(name)
        pending, table = batch.rows, batch.table
        for _part, ident in keys:
            key = tuple(ident)
            pending.pop(key, None)
            table.delete(key)


def _put(table: Table, rows: dict[Ident, Row]) -> None:
    """Put a batch's rows (identity -> row) into their table.

    A table in one partition ordered by identity, without secondary indexes, takes rows of
    identities after all of its own (a log of inserts in key order) as whole blocks
    (`Table.load_rows` while it is empty, `Table.install_prepared` after), with no step
    per row; any other batch goes by `Table.put_many`.
    """
    if table.ordered_by_identity and not table.secondary:
        if not len(table):
            rowids = None if table.keyed else list(map(itemgetter(0), rows))
            table.load_rows(list(rows.values()), rowids)
            return
        held = table.partitions[()]
        last = held.last_key()  # of a block still encoded too (a checkpoint's): not decoded
        if isinstance(table.index, OrderIndex) and last is not None and _all_after(rows, last):
            table.install_prepared({(): (held, rows)}, {})
            return
    table.put_many(list(rows), list(rows.values()))


def _all_after(idents: dict[Ident, Row], last: Ident) -> bool:
    """Whether every one of `idents` sorts after `last`."""
    try:
        return min(idents) > last
    except TypeError:  # NULL or values of another type among them: not in order
        return False


def _as_tuples(rows: Sequence[Sequence[Any]]) -> list[Row]:
    return list(map(tuple, rows))


def _shaper(schema: TableSchema, columns: Sequence[str]) -> Shape:
    """How rows logged with `columns` become rows of `schema`: its columns in its order, a
    column the log names that the table no longer has left out, one it lacks NULL."""
    if list(columns) == list(schema.column_names):
        return _as_tuples
    positions = [schema.positions.get(c.lower()) for c in columns]
    width = len(schema.columns)

    def shape(rows: Sequence[Sequence[Any]]) -> list[Row]:
        shaped = []
        for row in rows:
            slots: list[Any] = [None] * width
            for position, value in zip(positions, row, strict=True):
                if position is not None:
                    slots[position] = value
            shaped.append(tuple(slots))
        return shaped

    return shape


def _ident_getter(table: Table) -> Callable[[Row], Ident]:
    """`table.ident_of` without a call of its own per row where the key is one column."""
    positions = table.layout.key_positions
    if len(positions) == 1:
        (position,) = positions
        pick = itemgetter(position)
        return lambda row: (pick(row),)
    return table.ident_of


def unreplayable(log: WriteAheadLog, which: str, error: Exception) -> CorruptLog:
    """What recovery raises when `which` record of `log` cannot replay (`error`): the log is
    named by its oldest segment, where an operator's look begins."""
    segment = log.segments()[0].path
    return CorruptLog(str(segment), 0, f"{which} cannot replay: {error}")
