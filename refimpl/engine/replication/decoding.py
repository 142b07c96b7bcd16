"""A database's committed transactions read from its log, as a replication slot sends them.

Every outlet reads the same log (`refimpl.engine.features.change_stream` reads one table of
it); a slot reads every table its reader shows, a transaction at a time, and gives each
change with the table's shape as the log holds it (its columns, their types, its key), so
that an output plugin encodes it without looking anything up. The log keeps an upsert's row
after the change and a delete's key; a table with before-images (REPLICA IDENTITY FULL) also
keeps each row before the change, which tells an insert from an update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

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


class RowChange(NamedTuple):
    """One change of a transaction; the n-th of those a slot shows is at place n (a named
    tuple: a large transaction makes one per row, and a tuple is made fastest)."""

    relation: Relation
    op: str  # INSERT, UPDATE, DELETE, TRUNCATE or DDL
    new: tuple[Any, ...] | None = None  # the row after an insert or update
    old: tuple[Any, ...] | None = None  # the row before it, on a table with before-images
    key: tuple[Any, ...] | None = None  # a delete's key values (on relation.key)
    statement: str | None = None  # a DDL's (or TRUNCATE's) statement


@dataclass(frozen=True, slots=True)
class Transaction:
    lsn: int
    committed_at: int  # microseconds since 1970
    changes: list[RowChange]


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
        changes: list[RowChange] = []
        for entry in record.entries:
            if entry.table is not None and shows(entry.table.lower()):
                changes += _changes_of(database, entry, shapes)
        yield Transaction(lsn, record.committed_at, changes)


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


def _changes_of(
    database: Database, entry: records.Entry, shapes: dict[tuple[str, tuple[str, ...]], Relation]
) -> list[RowChange]:
    def shape(columns: tuple[str, ...] | None) -> Relation:
        key = (entry.table or "", columns or ())
        found = shapes.get(key)
        if found is None:
            found = shapes[key] = relation_of(database, entry.table or "", columns)
        return found

    before = entry.before
    if entry.kind == records.UPSERT:
        columns, rows, _rowids = entry.payload
        relation = shape(tuple(columns))
        olds: list[Any] = [None] * len(rows) if before is None else before.rows
        return [
            RowChange(
                relation,
                INSERT if old is None else UPDATE,
                tuple(row),
                None if old is None else tuple(old),
            )
            for row, old in zip(rows, olds, strict=True)
        ]
    if entry.kind == records.DELETE:
        relation = shape(tuple(before.columns) if before is not None else None)
        keys = entry.payload[0]
        olds = [None] * len(keys) if before is None else before.rows
        identified = bool(relation.key)
        return [
            RowChange(
                relation,
                DELETE,
                None,
                None if old is None else tuple(old),
                tuple(ident) if identified else None,
            )
            for (_part, ident), old in zip(keys, olds, strict=True)
        ]
    if entry.kind == records.DDL:
        statement = str(entry.payload[0])
        op = TRUNCATE if statement.lstrip().upper().startswith("TRUNCATE") else DDL
        return [RowChange(shape(None), op, statement=statement)]
    return []
