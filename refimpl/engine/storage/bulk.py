"""Bulk loads that do not stop the other writers: rows prepared outside the write lock.

A load of many new rows into one table (an import's) is one transaction like any other: one
log record, one LSN, all its rows or none, and no reader sees part of it. What differs is
where the work is done. `prepare` does everything that depends only on the rows and the
table's layout without any database lock: the NOT NULL checks, each row's place (partition
and order key), each partition's new rows as a sorted structure, the log entry's bytes, the
revision values the rows touch and what they count against the memory limit, and the
checksum of all but the first bytes of that entry. The commit (`Database.commit_load`) then
holds the write lock only to check the table is unchanged, append the prepared bytes to the
log (summing only the bytes before the known checksum, and not copying them) and swap or
merge the prepared partitions in.

A load that cannot go this way (triggers, secondary indexes, before-images, a key already
held, a key twice in the load, a table changed since) is refused with None, and the caller
inserts the rows the ordinary way, which finds and reports any error itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sortedcontainers import SortedDict

from refimpl.engine.storage import records
from refimpl.engine.storage.memory_limit import rows_bytes
from refimpl.engine.storage.records import Entry
from refimpl.engine.storage.table import Ident, OrderKey, PartKey, Row, Table
from refimpl.engine.storage.values import TypedRows
from refimpl.engine.storage.wal_crc import KnownTail
from refimpl.engine.tracking.revisions import Touched

# Rows placed at a time: each slice is a few C calls of a few milliseconds, so other threads
# get the interpreter lock in between.
SLICE_ROWS = 65_536


@dataclass(slots=True)
class PreparedLoad:
    """New rows of one table, ready to install; made by `prepare`."""

    key: str  # the table's lower-case name
    table: Table  # the committed table they were prepared for (the same object at install)
    count: int  # rows
    index: dict[Ident, tuple[PartKey, OrderKey]]  # each new identity's place (taken over)
    partitions: dict[PartKey, SortedDict]  # the new rows of each partition, sorted
    record: bytearray  # the log record, encoded but for its commit time (`records.stamp`)
    checksum: KnownTail  # of the record after its commit time: the log sums only the rest
    touched: Touched
    growth: int  # bytes the rows count against the memory limit

    def __len__(self) -> int:
        return self.count

    @property
    def distinct(self) -> bool:
        """True when no identity occurs twice in the load (before it is installed)."""
        return len(self.index) == self.count


def eligible(table: Table, rows: TypedRows, settings: dict[str, Any]) -> bool:
    """True when these rows may load by `prepare`: typed for the table's columns, in its
    order, into a table without secondary indexes, before-images or a DEDUP key, in a
    database without triggers (an INSERT trigger runs SQL per row)."""
    schema = table.schema
    return (
        bool(rows)
        and rows.types == tuple(column.type for column in schema.columns)
        and not table.secondary
        and not schema.replica_identity_full
        and not schema.dedup_key
        and not settings.get("triggers")
    )


def keys_of(table: Table, rows: TypedRows) -> list[Ident]:
    """The identities of the rows of a keyed table (a key given twice: see `distinct`)."""
    positions = table.layout.key_positions
    if len(positions) == 1:
        return list(zip(map(itemgetter(positions[0]), rows), strict=True))
    return list(map(itemgetter(*positions), rows))


def not_null_ok(table: Table, rows: TypedRows) -> bool:
    """True when no row has NULL in a NOT NULL column (one C pass per such column)."""
    return not any(
        None in map(itemgetter(position), rows) for position, _name in table.layout.not_null
    )


def prepare(key: str, table: Table, rows: TypedRows, idents: list[Ident]) -> PreparedLoad:
    """Everything about the rows that needs no lock: `table` is only read (its layout and
    schema, which a committed table never changes: a schema change makes a new table)."""
    schema = table.schema
    parts: list[PartKey] = []
    orders: list[OrderKey] = []
    for start in range(0, len(rows), SLICE_ROWS):
        end = start + SLICE_ROWS
        some_parts, some_orders = table.place_all(rows[start:end], idents[start:end])
        parts += some_parts
        orders += some_orders
    batches: dict[PartKey, dict[OrderKey, Row]] = {}
    partitions: dict[PartKey, SortedDict] = {}
    if parts.count(parts[0]) == len(parts):  # one partition: sorted straight from the rows
        partitions[parts[0]] = SortedDict(zip(orders, rows, strict=True))
    else:
        for part, order, row in zip(parts, orders, rows, strict=True):
            batch = batches.get(part)
            if batch is None:
                batches[part] = batch = {}
            batch[order] = row
    while batches:  # each batch let go once sorted: no two copies of all the rows at once
        part, batch = batches.popitem()
        partitions[part] = SortedDict(batch)
    index: dict[Ident, tuple[PartKey, OrderKey]] = {}
    for start in range(0, len(idents), SLICE_ROWS):  # in slices, as the placing above
        end = start + SLICE_ROWS
        places = zip(parts[start:end], orders[start:end], strict=True)
        index.update(zip(idents[start:end], places, strict=True))
    rowids = None if table.keyed else list(map(itemgetter(0), idents))
    entry = Entry.upsert(schema.name, schema.column_names, rows, rowids)
    rev_column = schema.rev_column
    if rev_column is None:
        touched = Touched(frozenset(), True)
    else:
        touched = Touched(frozenset(map(itemgetter(schema.position(rev_column)), rows)))
    record = records.encode_unstamped([entry])
    return PreparedLoad(
        key=key,
        table=table,
        count=len(rows),
        index=index,
        partitions=partitions,
        record=record,
        checksum=KnownTail.of(record, records.STAMP_END),
        touched=touched,
        growth=rows_bytes(rows, schema),
    )


def still_fits(load: PreparedLoad, tables: dict[str, Table]) -> bool:
    """True when the load may install now (the caller holds the write lock): its table is
    the committed one it was prepared for, and, keyed, holds none of its keys yet."""
    table = tables.get(load.key)
    if table is not load.table or table.secondary:
        return False
    if table.keyed:
        return not any(map(table.index.__contains__, load.index))
    return True
