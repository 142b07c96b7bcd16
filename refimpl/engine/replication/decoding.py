"""A database's committed transactions read from its log, as a replication slot sends them.

Every outlet reads the same log through the same decoder: `change_stream.entry_run` makes
each entry's `Change` records, here as for `changes()`, `/api/changes` and the event stream.
A slot reads every table its reader shows, a transaction at a time, and gives each change
beside the table's shape as the log holds it (a `Relation`: its columns, their types, its
key), its row on those columns, so that an output plugin encodes it without looking anything
up. The log keeps an upsert's row after the change and a delete's key; a table with
before-images (REPLICA IDENTITY FULL) also keeps each row before the change, which tells an
insert from an update (`kind`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change, entry_run
from refimpl.engine.statements.pg_catalog import name_oid
from refimpl.engine.storage import records
from refimpl.engine.storage.database import Database

INSERT, UPDATE, DELETE, TRUNCATE, DDL = "insert", "update", "delete", "truncate", "ddl"


@dataclass(frozen=True, slots=True)
class Relation:
    """A table's shape as a change of it was logged."""

    name: str
    oid: int  # the table's OID in pg_class
    columns: tuple[str, ...]
    types: tuple[str, ...]  # each column's type (STRING for a column the table lost since)
    key: tuple[str, ...]  # the columns that identify a row; () for a table of row ids
    full: bool  # the table keeps before-images (REPLICA IDENTITY FULL)

    def key_row(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """A row on `columns` holding the key's `values`, NULL elsewhere."""
        by_name = dict(zip((k.lower() for k in self.key), values, strict=False))
        return tuple(by_name.get(c.lower()) for c in self.columns)


# A change as a slot shows it: the `Change` record every outlet reads, beside its table's
# shape as the change was logged (the change's row is on `Relation.columns`). A plain pair:
# a large transaction makes one per row, by a C-level zip.
Shown = tuple[Relation, Change]


@dataclass(frozen=True, slots=True)
class Transaction:
    lsn: int
    committed_at: int  # microseconds since 1970
    changes: list[Shown]


def read_transactions(
    database: Database, after_lsn: int, shows: Callable[[str], bool], limit: int
) -> Iterator[Transaction]:
    """Up to `limit` transactions committed after `after_lsn`, durable ones only, each with
    the changes of the tables `shows` (by their name in lower case); transactions that show
    none are given too (empty), so that a reader's position moves past them. Raises Gone
    when the log no longer holds the position."""
    shapes: dict[tuple[str, tuple[str, ...]], Relation] = {}
    for lsn, payload in database.log.read(after_lsn, limit_records=limit):
        record = records.decode(lsn, payload)
        changes: list[Shown] = []
        for entry in record.entries:
            if entry.table is not None and shows(entry.table.lower()):
                relation = _relation_of_entry(database, entry, shapes)
                # Before-images whenever the entry has them (`full`): the table may have
                # kept them then and not now, or the other way round.
                run = entry_run(record, entry, relation.columns, True, len(changes))
                if run is not None:
                    changes += zip(repeat(relation), run.changes())
        yield Transaction(lsn, record.committed_at, changes)


def kind(change: Change) -> str:
    """What a change is to a slot: INSERT or UPDATE (an upsert with a row before it), DELETE,
    TRUNCATE or DDL (a ddl by its statement)."""
    op = change.op
    if op == "upsert":
        return INSERT if change.old is None or change.old is UNLOGGED else UPDATE
    if op == "delete":
        return DELETE
    return TRUNCATE if statement(change).lstrip().upper().startswith("TRUNCATE") else DDL


def old_row(change: Change) -> tuple[Any, ...] | None:
    """The row before the change, where the log keeps it (before-images); else None."""
    old = change.old
    return None if old is None or old is UNLOGGED else old


def statement(change: Change) -> str:
    """A ddl's (or TRUNCATE's) statement text."""
    return change.key or ""


def key_values(relation: Relation, change: Change) -> tuple[Any, ...] | None:
    """A delete's key values on `relation.key` (decoded from its `key`, the hex MessagePack
    `[partition, identity]` every outlet shows); None for a table of row ids, which has no
    key to show."""
    if not relation.key or change.key is None:
        return None
    _part, ident = msgspec.msgpack.decode(bytes.fromhex(change.key))
    return tuple(ident)


def relation_of(database: Database, table: str, columns: tuple[str, ...] | None = None) -> Relation:
    """The shape of `table` on `columns` (default: its columns now)."""
    found = database.tables.get(table.lower())
    if found is None:
        return Relation(
            table, name_oid(table), columns or (), ("STRING",) * len(columns or ()), (), False
        )
    schema = found.schema
    names = schema.column_names if columns is None else columns
    types = tuple(schema.type_of(c) if c.lower() in schema.positions else "STRING" for c in names)
    return Relation(
        schema.name,
        name_oid(schema.name),
        names,
        types,
        schema.key_columns,
        schema.replica_identity_full,
    )


def _relation_of_entry(
    database: Database, entry: records.Entry, shapes: dict[tuple[str, tuple[str, ...]], Relation]
) -> Relation:
    """The shape an entry's changes are shown on: an upsert's logged columns, a delete's
    before-image columns, else the table's columns now (a delete keeps only its key, a DDL
    no row)."""
    columns: tuple[str, ...] | None = None
    if entry.kind == records.UPSERT:
        columns = tuple(entry.payload[0])
    elif entry.kind == records.DELETE and entry.before is not None:
        columns = tuple(entry.before.columns)
    key = (entry.table or "", columns or ())
    found = shapes.get(key)
    if found is None:
        found = shapes[key] = relation_of(database, entry.table or "", columns)
    return found
