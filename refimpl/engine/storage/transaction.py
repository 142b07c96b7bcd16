"""A write transaction: private changes on top of the committed tables, and its log entries.

Row changes are kept as the net effect per row identity (`pending`): the row after the
change, or None for a deleted row. A schema change or a partition drop inside the
transaction first seals the table's pending changes into log entries and then works on a
private copy-on-write clone of the table. At COMMIT the remaining pending changes are sealed
too; the entries, in order, are the transaction's log record: applying them in order gives
its result. Within a table, deletes come before upserts, so a key that moves onto another
row's old key replays correctly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeGuard

from refimpl.engine.storage.access_hints import AccessHints, IndexProbe
from refimpl.engine.storage.indexes import PendingKeys
from refimpl.engine.storage.records import UPSERT, Entry
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Ident, OrderKey, Row, Table, parts_for_period_range
from refimpl.engine.tracking.revisions import Touched
from refimpl.errors import UnknownTable


@dataclass(slots=True, init=False)
class TableWork:
    """One table's state inside a transaction."""

    name: str
    base: Table | None
    working: Table | None
    pending: dict[Ident, Row | None]
    dropped: bool
    created: bool
    sealed: dict[Ident, Row | None]
    touched: set[Any]  # rev-column values of changed rows
    touched_all: bool  # a schema change or partition drop: every value moved
    pending_keys: PendingKeys  # UNIQUE keys of `pending`

    def __init__(self, name: str, base: Table | None) -> None:
        # Written out: the generated one weighs every default, at each INSERT's first row.
        self.name = name
        self.base = base
        self.working = None
        self.pending = {}
        self.dropped = self.created = self.touched_all = False
        self.sealed = {}
        self.touched = set()
        self.pending_keys = PendingKeys()

    def current(self) -> Table:
        table = self.working if self.working is not None else self.base
        if table is None or self.dropped:
            raise UnknownTable(self.name)
        return table

    @property
    def schema(self) -> TableSchema:
        return self.current().schema

    def get(self, ident: Ident) -> Row | None:
        if ident in self.pending:
            return self.pending[ident]
        return self.current().get(ident)

    def put(self, ident: Ident, row: Row) -> None:
        self.pending[ident] = row

    def delete(self, ident: Ident) -> None:
        self.pending[ident] = None

    def change(self, changes: dict[Ident, Row | None]) -> None:
        """Take a statement's net changes; UniqueViolation (nothing taken) when they would
        break a UNIQUE index or constraint."""
        secondary = self.current().secondary
        if secondary:
            self.pending_keys.check(self.name, secondary.values(), self.pending, changes)
        self.pending.update(changes)

    def rows(self, hints: AccessHints) -> Iterator[Row]:
        """The rows as this transaction sees them, in table order."""
        table = self.current()
        if hints.ident is not None:
            row = self.get(hints.ident)
            if row is not None:
                yield row
            return
        if hints.index is not None and not self.pending:
            yield from hints.index.rows(table)
            return
        parts = _parts(table, hints)
        if not self.pending:
            yield from table.scan(parts, hints.lead_low, hints.lead_high)
            return
        yield from self._merged(table, parts, *table.lead_range(hints.lead_low, hints.lead_high))

    def rows_with_idents(self, probe: IndexProbe | None = None) -> Iterator[tuple[Ident, Row]]:
        """(identity, row) pairs as this transaction sees them (UPDATE and DELETE); with an
        index probe, the committed rows it finds (and every pending row): a superset of
        those the probe's terms match."""
        table = self.current()
        pending = self.pending
        index = None if probe is None else table.secondary.get(probe.name)
        committed: list[tuple[Ident, Row]] = []
        if probe is not None and index is not None:
            for ident in list(index.search(probe.prefix, probe.low, probe.high)):
                row = table.get(ident)
                if row is not None:  # always: an index holds only its table's identities
                    committed.append((ident, row))
        else:
            committed = list(table.scan_with_idents())
        for ident, row in committed:
            if ident in pending:
                continue
            yield ident, row
        for ident, row in list(pending.items()):
            if row is not None:
                yield ident, row

    def _merged(
        self, table: Table, parts: list | None, low: OrderKey | None, high: OrderKey | None
    ) -> Iterator[Row]:
        """The committed rows and the pending ones, in table order; only those of order
        keys in [`low`, `high`) (None: no bound) and of the partitions `parts` (None: all)."""
        pending = self.pending
        key_count = len(table.layout.key_positions) or 1
        wanted = None if parts is None else set(parts)
        placed = []
        for part, partition in table.partitions.items():
            if wanted is not None and part not in wanted:
                continue
            for order in partition.irange(low, high, inclusive=(True, False)):
                if order[-key_count:] not in pending:
                    placed.append((part, order, partition[order]))
        for ident, row in pending.items():
            if row is not None:
                part, order = table.place(row, ident)
                if (low is None or order >= low) and (high is None or order < high):
                    placed.append((part, order, row))
        placed.sort(key=lambda item: (item[0], item[1]))
        for _, _, row in placed:
            yield row

    def seal(self, entries: list[Entry]) -> None:
        """Turn pending changes into log entries; apply them to the private clone if any."""
        pending = self.pending
        if not pending:
            return
        table = self.current()
        rows = list(pending.values())
        self._touch(table, list(pending), rows)
        names = table.schema.column_names
        # Before-images only for tables that keep them: other tables' entries stay as they are.
        full = table.schema.replica_identity_full
        if not full and _only_upserts(rows):
            # Only upserts (an import's rows, say): the entry takes them as they are.
            rowids = None if table.keyed else list(map(itemgetter(0), pending))
            entries.append(Entry(UPSERT, self.name, (list(names), rows, rowids)))  # .upsert's
        else:
            self._seal_each(table, entries, full)
        if self.working is not None:
            apply_pending(self.working, pending)
        elif self.sealed:
            self.sealed.update(pending)
        else:
            self.sealed = pending
        self.pending = {}
        if self.pending_keys.by_index:  # only tables with UNIQUE indexes keep keys
            self.pending_keys.clear()

    def _touch(self, table: Table, idents: list[Ident], rows: list[Row | None]) -> None:
        """Note the rev-column values the pending changes move: those of the rows they
        replace or delete and of the rows they write."""
        rev_column = table.schema.rev_column
        if rev_column is None:
            self.touched_all = True
            return
        value_of = itemgetter(table.schema.position(rev_column))
        self.touched.update(map(value_of, table.rows_of(idents)))
        self.touched.update(map(value_of, filter(None, rows)))

    def _seal_each(self, table: Table, entries: list[Entry], full: bool) -> None:
        """The entries of pending changes that delete rows or keep before-images."""
        deletes = []
        upserts = []
        rowids: list[int] | None = [] if not table.keyed else None
        old_upserts: list[Row | None] = []
        old_deletes: list[Row] = []
        for ident, row in self.pending.items():
            old = None
            if full:
                old = self.sealed[ident] if ident in self.sealed else table.get(ident)
            if row is None:
                part = table.part_of_ident(ident)
                if part is not None:
                    deletes.append((part, ident))
                    if full:
                        assert old is not None  # a row the table holds has its image
                        old_deletes.append(old)
            else:
                upserts.append(row)
                if full:
                    old_upserts.append(old)
                if rowids is not None:
                    rowids.append(ident[0])
        names = table.schema.column_names
        if deletes:
            entries.append(Entry.delete(self.name, deletes, (names, old_deletes) if full else None))
        if upserts:
            entries.append(
                Entry.upsert(self.name, names, upserts, rowids, old_upserts if full else None)
            )

    def make_private(self) -> Table:
        """The table this transaction may change in place (a clone of the committed one)."""
        if self.working is None:
            self.working = self.current().clone()
            apply_pending(self.working, self.sealed)
            self.sealed = {}
        return self.working


def _only_upserts(rows: list[Row | None]) -> TypeGuard[list[Row]]:
    """No row is a deletion (None); one test of the whole list, no Python step per row."""
    return None not in rows


def apply_pending(table: Table, pending: dict[Ident, Row | None]) -> None:
    """Apply net changes: deletes first, then upserts (see the module docstring)."""
    if len(pending) == 1:  # an INSERT's one row, say: no lists made for it
        ((ident, row),) = pending.items()
        if row is None:
            table.delete(ident)
        else:
            table.put(ident, row)
        return
    rows = list(pending.values())
    if _only_upserts(rows):  # an import's rows, say: no Python step per row
        table.put_many(list(pending), rows)
        return
    for ident, row in pending.items():
        if row is None:
            table.delete(ident)
    upserts = [(ident, row) for ident, row in pending.items() if row is not None]
    table.put_many([ident for ident, _ in upserts], [row for _, row in upserts])


def _parts(table: Table, hints: AccessHints) -> list | None:
    if hints.low_period is None and hints.high_period is None and hints.symbol is None:
        return None
    return parts_for_period_range(table, hints.low_period, hints.high_period, hints.symbol)


@dataclass(frozen=True, slots=True)
class _TableMark:
    """One table's state inside a transaction at a savepoint (copies: never written)."""

    work: TableWork
    name: str
    working: Table | None
    pending: dict[Ident, Row | None]
    sealed: dict[Ident, Row | None]
    dropped: bool
    created: bool
    touched: frozenset[Any]
    touched_all: bool
    keys: dict[str, dict[tuple[Any, ...], Ident]]


@dataclass(frozen=True, slots=True)
class Mark:
    """A transaction's state at a SAVEPOINT, which `Transaction.rollback_to` brings back
    (as often as asked). Taking one copies the net changes so far (not the committed rows)."""

    tables: dict[str, _TableMark]
    entries: int
    database_changes: int
    after_commit: int


class Transaction:
    """The changes of one write transaction until COMMIT or ROLLBACK."""

    def __init__(self, tables: dict[str, Table]) -> None:
        self._committed = tables
        self.work: dict[str, TableWork] = {}
        self.entries: list[Entry] = []
        self.database_changes: list[str] = []
        # Work outside the database (the access file, say) that must follow the commit: a
        # rolled-back transaction never runs it.
        self.after_commit: list[Callable[[], None]] = []

    def table(self, name: str) -> TableWork:
        """The table as this transaction sees it; UnknownTable when it does not exist."""
        key = name.lower()
        work = self.work.get(key)
        if work is None:
            base = self._committed.get(key)
            if base is None:
                raise UnknownTable(name)
            work = TableWork(base.schema.name, base)
            self.work[key] = work
        else:
            work.current()  # UnknownTable when this transaction dropped it
        return work

    def has_table(self, name: str) -> bool:
        key = name.lower()
        work = self.work.get(key)
        if work is not None:
            return not work.dropped and (work.working is not None or work.base is not None)
        return key in self._committed

    def table_names(self) -> list[str]:
        names = {k: t.schema.name for k, t in self._committed.items()}
        for key, work in self.work.items():
            if work.dropped:
                names.pop(key, None)
            elif work.working is not None:
                names[key] = work.working.schema.name
        return sorted(names.values(), key=str.lower)

    def create(self, table: Table) -> None:
        key = table.schema.name.lower()
        work = self.work.get(key)
        if work is None:
            work = TableWork(table.schema.name, None)
            self.work[key] = work
        work.name = table.schema.name
        work.working = table
        work.dropped = False
        work.created = True
        work.pending = {}

    def drop(self, name: str) -> None:
        work = self.table(name)
        work.seal(self.entries)
        work.dropped = True
        work.working = None

    def ddl(self, name: str, text: str, touched: set[Any] | None = None) -> None:
        """Log a schema change; it moves every value's revision unless `touched` names them."""
        self.entries.append(Entry.ddl(name, text))
        work = self.work.get(name.lower())
        if work is not None:
            if touched is None:
                work.touched_all = True
            else:
                work.touched |= touched

    def touched(self) -> dict[str, Touched]:
        """What the sealed transaction changed, per table (for revisions)."""
        return {
            key: Touched(frozenset(work.touched), work.touched_all)
            for key, work in self.work.items()
            if work.touched or work.touched_all
        }

    def mark(self) -> Mark:
        """The state to come back to at a ROLLBACK TO this savepoint."""
        tables = {}
        for key, work in self.work.items():
            kept = work.working
            if kept is not None:
                # The table as it is becomes the savepoint's, only read from now on; the
                # transaction goes on writing a copy-on-write twin of it.
                work.working = kept.clone()
            tables[key] = _TableMark(
                work,
                work.name,
                kept,
                dict(work.pending),
                dict(work.sealed),
                work.dropped,
                work.created,
                frozenset(work.touched),
                work.touched_all,
                {name: dict(keys) for name, keys in work.pending_keys.by_index.items()},
            )
        return Mark(tables, len(self.entries), len(self.database_changes), len(self.after_commit))

    def rollback_to(self, mark: Mark) -> None:
        """Undo everything done since `mark` was taken; the mark stays usable."""
        for key in [key for key in self.work if key not in mark.tables]:
            del self.work[key]
        for key, kept in mark.tables.items():
            work = kept.work
            self.work[key] = work
            work.name = kept.name
            work.working = None if kept.working is None else kept.working.clone()
            work.pending = dict(kept.pending)
            work.sealed = dict(kept.sealed)
            work.dropped = kept.dropped
            work.created = kept.created
            work.touched = set(kept.touched)
            work.touched_all = kept.touched_all
            work.pending_keys.by_index = {name: dict(keys) for name, keys in kept.keys.items()}
        del self.entries[mark.entries :]
        del self.database_changes[mark.database_changes :]
        del self.after_commit[mark.after_commit :]

    def one_new_row(self) -> tuple[str, str, Table, Ident, Row] | None:
        """(table key, its name, the committed table, identity, row) when this transaction's
        one change is one row new to a committed table (a one-row INSERT committing on its
        own), which `Database.commit_locked` logs and installs without sealing it; else
        None. Sealing it would give one upsert entry of the row, the rev-column value of
        the row alone touched (none was replaced), and install it by `Table.put`."""
        work_by_key = self.work
        if len(work_by_key) != 1 or self.entries or self.database_changes:
            return None
        ((key, work),) = work_by_key.items()
        pending, base = work.pending, work.base
        if (
            len(pending) != 1
            or base is None
            or work.working is not None
            or work.dropped
            or work.sealed
            or work.touched
            or work.touched_all
        ):
            return None
        ((ident, row),) = pending.items()
        if row is None or base.index.get(ident) is not None:
            return None
        return key, work.name, base, ident, row

    def seal_all(self) -> list[Entry]:
        for work in self.work.values():
            if not work.dropped:
                work.seal(self.entries)
        return self.entries

    @property
    def empty(self) -> bool:
        return (
            not self.entries
            and not self.database_changes
            and not any(w.pending for w in self.work.values())
        )

    def install(self, tables: dict[str, Table]) -> None:
        """Make the sealed changes the committed state (the caller holds the state lock)."""
        for key, work in self.work.items():
            if work.dropped:
                tables.pop(key, None)
            elif work.working is not None:
                tables[key] = work.working
            elif work.base is not None:
                apply_pending(work.base, work.sealed)
