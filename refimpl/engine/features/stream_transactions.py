"""A log record's events as the event stream shows them (`transaction_events`): what
`recent_transactions.RecentTransactions` keeps for every stream of a database.

What a caller may rely on: `transaction_events` gives one `StreamTransaction` of the record's
changes in the log's order, each a `Change` record (as `change_stream.entry_run` makes them
for every outlet) encoded once by its table's `EventShape`, whichever way it was made: a
one-row upsert's record (a one-row INSERT's, most records a stream reads) is made without
the `Record`, `Entry` and `ChangeRun` objects in between, into the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change, entry_run
from refimpl.engine.features.event_cursor import (
    CHANGE,
    NO_LINKS,
    RESET,
    EventShape,
    Links,
    StreamItem,
    StreamTransaction,
    ddl_item,
)
from refimpl.engine.storage import records
from refimpl.engine.storage.schema import TableSchema

_json = msgspec.json.Encoder()
_decode_record = records.raw_decoder()  # a record as `[committed_at, raw entries]`
_PLAIN_UPSERT = 5  # the length of an upsert's raw entry without before-images
# The named tuples made at every change (see `event_cursor._new`): by one C call.
_new = tuple.__new__


def transaction_events(
    database: str,
    lsn: int,
    payload: bytes,
    schema_of: Callable[[str], TableSchema | None],
    links: Links = NO_LINKS,
    shapes: dict[str, EventShape] | None = None,
) -> StreamTransaction:
    """The events of the log record `lsn`, in the log's order, with the tables' current
    schemas (`schema_of(key)`; None: the table is gone, its rows make no event) and the
    rows' links as `links` names them: each change a `Change` record (`entry_run`, as every
    outlet makes them), encoded once by its table's `EventShape`. `shapes` keeps those by
    table key from one call to the next (each made again when its schema changed)."""
    committed_at, raw_entries = _decode_record(payload)
    shapes = {} if shapes is None else shapes
    if len(raw_entries) == 1:  # most records: a one-row INSERT's has one entry of one row
        one = _one_row_upsert(database, lsn, committed_at, raw_entries[0], schema_of, links, shapes)
        if one is not None:
            return one
    record = records.Record(lsn, committed_at, [records.entry_of(raw) for raw in raw_entries])
    return _record_events(database, record, schema_of, links, shapes)


def _one_row_upsert(
    database: str,
    lsn: int,
    committed_at: int,
    raw: list[Any],
    schema_of: Callable[[str], TableSchema | None],
    links: Links,
    shapes: dict[str, EventShape],
) -> StreamTransaction | None:
    """`_record_events` of a record whose one entry upserts one row, logged on its table's
    current columns without before-images, into a table without them (a one-row INSERT's,
    the records a stream reads most): the same transaction, made with no `Record`, `Entry`
    or `ChangeRun` in between, at about half the Python steps. None for any other entry."""
    if raw[0] != records.UPSERT or len(raw) != _PLAIN_UPSERT:
        return None
    _, table, columns, rows, rowids = raw
    if len(rows) != 1:
        return None
    key = table.lower()
    schema = schema_of(key)
    if schema is None or schema.replica_identity_full or tuple(columns) != schema.column_names:
        return None
    shape = shapes.get(key)
    if shape is None or shape.schema is not schema:
        shape = shapes[key] = EventShape(database, schema, links)
    row = rows[0]
    hex_key = shape.key_of(row, rowids[0] if rowids else 0)
    change = _new(Change, (lsn, 0, committed_at, "upsert", None, row, UNLOGGED))
    encoded = _json.encode(shape.upsert_data(lsn, row, hex_key))
    item = _new(StreamItem, (key, CHANGE, encoded, change, shape, hex_key))
    return _new(StreamTransaction, (lsn, committed_at, (item,), len(encoded), False))


def _record_events(
    database: str,
    record: records.Record,
    schema_of: Callable[[str], TableSchema | None],
    links: Links,
    shapes: dict[str, EventShape],
) -> StreamTransaction:
    """`transaction_events` of a decoded record, whatever its entries."""
    lsn = record.lsn
    items: list[StreamItem] = []
    size = 0  # bytes of the items' data
    resets = False
    seqs: dict[str, int] = {}  # each table's next `seq` in the transaction
    for entry in record.entries:
        if entry.table is None:
            continue  # a change of the database itself (ALTER DATABASE ... SET)
        key = entry.table.lower()
        schema = schema_of(key)
        if entry.kind == records.DDL:
            item = ddl_item(key, entry.table, entry.payload[0], lsn)
            if schema is None or item.kind == RESET:
                items.append(item)
                size += len(item.data)
                resets = resets or item.kind == RESET
                continue
        elif schema is None:
            continue
        shape = shapes.get(key)
        if shape is None or shape.schema is not schema:
            shape = shapes[key] = EventShape(database, schema, links)
        seq = seqs.get(key, 0)
        run = entry_run(record, entry, schema.column_names, schema.replica_identity_full, seq)
        if run is None:
            continue
        seqs[key] = seq + len(run.items)
        op = run.op
        if op == "ddl":
            items.append(item._replace(change=next(run.changes()), shape=shape))
            size += len(item.data)
            continue
        upsert = op == "upsert"
        rowids = entry.payload[2] if upsert else None
        for index, change in enumerate(run.changes()):
            hex_key = (
                shape.key_of(change.row, rowids[index] if rowids else index)
                if upsert
                else change.key
            )
            encoded = _json.encode(shape.data(change, hex_key))
            size += len(encoded)
            items.append(_new(StreamItem, (key, CHANGE, encoded, change, shape, hex_key)))
    return _new(StreamTransaction, (lsn, record.committed_at, tuple(items), size, resets))
