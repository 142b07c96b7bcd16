"""Bulk loads that do not stop the other writers: rows prepared outside the write lock.

A load of many new rows into one table (an import's) is one transaction like any other: one
log record, one LSN, all its rows or none, and no reader sees part of it. What differs is
where the work is done. `prepare` does everything that depends only on the rows and the
table's layout without any database lock: the NOT NULL checks, each row's place (partition
and order key), each partition's new rows as the table keeps them (`Blocks`), the log entry's
bytes, the revision values the rows touch and what they count against the memory limit, and
the checksum of all but the first bytes of that entry. `bulk_merge` then merges them into a
snapshot of the table's partitions and index, also with no lock held, and the commit
(`Database.commit_load`) holds the write lock only to append the prepared bytes to the log
(summing only the bytes before the known checksum, and not copying them) and, with the state
lock, to install the merged structures (redoing on them what other writers changed
meanwhile).

A load that cannot go this way (triggers, secondary indexes, before-images, a key already
held, a key twice in the load, a table changed since) is refused with None, and the caller
inserts the rows the ordinary way, which finds and reports any error itself.

No step here goes over all the rows in one C call: each pass over them (placing, encoding,
counting, indexing) is cut in slices, so the interpreter lock passes to other threads (a
writer's commit, /api/rev) between slices instead of waiting out a pass over a million rows.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, islice
from operator import itemgetter, le, lt
from typing import Any

import msgspec

from refimpl.engine.storage import records
from refimpl.engine.storage.blocks import Blocks
from refimpl.engine.storage.ident_index import SHARD_AT, ShardedIndex
from refimpl.engine.storage.memory_limit import rows_bytes
from refimpl.engine.storage.records import Entry
from refimpl.engine.storage.table import Ident, OrderKey, PartKey, Row, Table
from refimpl.engine.storage.values import TypedRows
from refimpl.engine.storage.wal_crc import KnownTail
from refimpl.engine.tracking.revisions import Touched

# Rows placed at a time: each slice is a few C calls of well under a millisecond, so other
# threads get the interpreter lock in between. On a busy machine the thread that holds it may
# wait for a CPU in the middle of a call, and every other thread of the server waits with it:
# 65,536 rows a slice made /api/rev wait up to 20 ms for the lock at each such call. A call
# that makes an object a row costs more than its Python: its fresh memory's first use (page
# faults, dear in a virtual machine). At 8,192 rows, a slice's identities (`rowid_idents`)
# took 0.5 to 2.0 ms of thread CPU in one step (medians of 122, a busy machine), and
# `place_all`'s order keys as long.
SLICE_ROWS = 2_048
# Keys checked for order at a time: a comparison of two order keys costs up to a
# microsecond, so a slice of `SLICE_ROWS` held the interpreter lock for 3 to 6 ms, and one
# of 2,048 up to 1 ms, five times an import's switch interval (`quick_switches`).
CHECK_ROWS = 512
# Rows encoded into the log record at a time: 4,096 took 0.4 ms of MessagePack.
ENCODE_ROWS = 1_024
# Rows counted against the memory limit at a time: 8,192 took 0.5 ms.
COUNT_ROWS = 2_048
# A load of at least this many rows is frozen out of the collector once prepared (gc.freeze).
FREEZE_ROWS = 100_000
# The interpreter's switch interval while a load runs (`quick_switches`), where the server's
# is 0.5 ms: how long a thread woken meanwhile (a request's bytes came) waits for the lock.
LOAD_SWITCH_SECONDS = 0.0002

_encoder = msgspec.msgpack.Encoder()
_NIL = 0xC0  # MessagePack's null


@dataclass(slots=True)
class PreparedLoad:
    """New rows of one table, ready to install; made by `prepare`."""

    key: str  # the table's lower-case name
    table: Table  # the committed table they were prepared for (the same object at install)
    count: int  # rows
    # Each new identity's place: sharded from `SHARD_AT` rows on (no one dict grows big).
    index: dict[Ident, tuple[PartKey, OrderKey]] | ShardedIndex
    # Each partition's new rows: as blocks (a partition the table lacks takes them over) and
    # the dict those blocks borrow, which holds exactly these rows (merged into one it holds),
    # or None where the blocks hold their own rows (`Blocks.from_rows`).
    partitions: dict[PartKey, tuple[Blocks, dict[OrderKey, Row] | None]]
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

    def let_go(self) -> None:
        """Let go of the load's index and partitions a piece at a time, once it is
        installed or refused: `count` stays, nothing else may be read after.

        Installed, the table holds the rows, but not always the load's own index: the
        merge copies each of its shards that the table's index has entries in too (another
        writer's rows, committed while the load was prepared, fall in most of the 256), and
        the load's shards die with it. Let go at once, a million entries are one step of
        15 ms at `Database.load_rows`' return (thread CPU) in which no other thread gets
        the interpreter lock."""
        index, self.index = self.index, {}
        if isinstance(index, ShardedIndex):
            index.let_go()
        partitions, held = self.partitions, self.table.partitions
        while partitions:  # each partition's new rows (its dict, if no block borrows it)
            part, (blocks, _rows) = partitions.popitem()
            if held.get(part) is not blocks:  # merged into one the table held, or refused
                blocks.let_go()


def eligible(table: Table, rows: TypedRows, settings: dict[str, Any]) -> bool:
    """True when these rows may load by `prepare`: typed for the table's columns, in its
    order (and for its column names, when the rows name theirs), into a table that takes
    loads (`takes_loads`)."""
    schema = table.schema
    return (
        bool(rows)
        and rows.types == tuple(column.type for column in schema.columns)
        and rows.columns in ((), tuple(column.name.lower() for column in schema.columns))
        and takes_loads(table, settings)
    )


def takes_loads(table: Table, settings: dict[str, Any]) -> bool:
    """True when any rows at all may load into `table` by `prepare`: it has no secondary
    indexes, before-images or DEDUP key, and its database no triggers (an INSERT trigger
    runs SQL per row). A caller may ask before it converts rows for a load."""
    schema = table.schema
    return (
        not table.secondary
        and not schema.replica_identity_full
        and not schema.dedup_key
        and not settings.get("triggers")
    )


def keys_of(table: Table, rows: TypedRows) -> list[Ident]:
    """The identities of the rows of a keyed table (a key given twice: see `distinct`)."""
    positions = table.layout.key_positions
    pick = itemgetter(positions[0]) if len(positions) == 1 else itemgetter(*positions)
    idents: list[Ident] = []
    for start in range(0, len(rows), SLICE_ROWS):
        some = map(pick, rows[start : start + SLICE_ROWS])
        idents += zip(some) if len(positions) == 1 else some
    return idents


def rowid_idents(first: int, count: int) -> list[Ident]:
    """The identities of `count` new rows of a table without key, ids from `first` on."""
    idents: list[Ident] = []
    for start in range(first, first + count, SLICE_ROWS):
        idents += zip(range(start, min(start + SLICE_ROWS, first + count)))
    return idents


def not_null_ok(table: Table, rows: TypedRows) -> bool:
    """True when no row has NULL in a NOT NULL column (one C pass per such column and slice)."""
    return not any(
        None in map(itemgetter(position), rows[start : start + SLICE_ROWS])
        for position, _name in table.layout.not_null
        for start in range(0, len(rows), SLICE_ROWS)
    )


def prepare(key: str, table: Table, rows: TypedRows, idents: list[Ident]) -> PreparedLoad:
    """Everything about the rows that needs no lock: `table` is only read (its layout and
    schema, which a committed table never changes: a schema change makes a new table).

    A load of `FREEZE_ROWS` or more leaves everything made so far frozen out of the
    collector (`freeze_if_many`), as the server does after its start. `idents` is taken
    over: emptied once used (`let_go`), as are the lists made here that die here.
    """
    schema = table.schema
    parts: list[PartKey] = []
    orders: list[OrderKey] = []
    one_part = True  # all the rows in one partition
    for start in range(0, len(rows), SLICE_ROWS):
        end = start + SLICE_ROWS
        some_parts, some_orders = table.place_all(rows[start:end], idents[start:end])
        one_part = one_part and some_parts.count(some_parts[0]) == len(some_parts)
        one_part = one_part and (not parts or some_parts[0] == parts[0])
        parts += some_parts
        orders += some_orders
    batches: dict[PartKey, dict[OrderKey, Row]] = {}
    partitions: dict[PartKey, tuple[Blocks, dict[OrderKey, Row] | None]] = {}
    if one_part and _ascending(orders):  # a load read in order: blocks straight from the rows
        partitions[parts[0]] = (Blocks.from_rows(orders, rows), None)
    elif one_part:  # straight from the rows, a slice at a time
        whole: dict[OrderKey, Row] = {}
        for start in range(0, len(rows), SLICE_ROWS):
            end = start + SLICE_ROWS
            whole.update(zip(orders[start:end], rows[start:end], strict=True))
        partitions[parts[0]] = (Blocks.from_sorted(_sorted_keys(orders, whole), whole), whole)
    else:
        for part, order, row in zip(parts, orders, rows, strict=True):
            batch = batches.get(part)
            if batch is None:
                batches[part] = batch = {}
            batch[order] = row
    while batches:  # each batch let go once made blocks: no two copies of all the rows
        part, batch = batches.popitem()
        partitions[part] = (Blocks.from_sorted(_sorted_keys(list(batch), batch), batch), batch)
    index: dict[Ident, tuple[PartKey, OrderKey]] | ShardedIndex
    if len(idents) >= SHARD_AT:  # a step per row, so that no dict's resize is long
        index = ShardedIndex.of(zip(idents, zip(parts, orders, strict=True), strict=True))
    else:
        index = dict(zip(idents, zip(parts, orders, strict=True), strict=True))
    rowids = None if table.keyed else _column(idents, 0)
    rev_column = schema.rev_column
    if rev_column is None:
        touched = Touched(frozenset(), True)
    else:
        touched = Touched(_distinct(rows, schema.position(rev_column)))
    record = encode_record(schema.name, schema.column_names, rows, rowids)
    growth = sum(
        rows_bytes(rows[start : start + COUNT_ROWS], schema)
        for start in range(0, len(rows), COUNT_ROWS)
    )
    # No block or index holds these lists (blocks are made of slices), only their items.
    let_go(parts, orders, idents, rowids or [])
    # What was made here (the rows' places, their index, the sorted partitions) lives as
    # long as the table.
    freeze_if_many(len(rows))
    return PreparedLoad(
        key=key,
        table=table,
        count=len(rows),
        index=index,
        partitions=partitions,
        record=record,
        checksum=KnownTail.of(record, records.STAMP_END),
        touched=touched,
        growth=growth,
    )


def encode_record(
    table: str, columns: Sequence[str], rows: Sequence[Row], rowids: list[int] | None
) -> bytearray:
    """The log record of an upsert of `rows` into `table`, unstamped: the bytes
    `records.encode_unstamped([Entry.upsert(table, columns, rows, rowids)])` makes, encoded
    `ENCODE_ROWS` rows at a time instead of in one C call."""
    empty: list[int] | None = None if rowids is None else []
    record = records.encode_unstamped([Entry.upsert(table, columns, [], empty)])
    # The record ends with its rows and its row ids: an empty array, then an empty array or
    # null. Only an array's header holds its length, so the two are written again in place
    # of those two bytes, a slice at a time.
    assert record[-1] == (_NIL if rowids is None else 0x90) and record[-2] == 0x90
    del record[-2:]
    _append_array(record, rows)
    if rowids is None:
        record.append(_NIL)
    else:
        _append_array(record, rowids)
    return record


def _append_array(record: bytearray, items: Sequence[Any]) -> None:
    """Append `items` to `record` as one MessagePack array, `ENCODE_ROWS` at a time."""
    record += _array_header(len(items))
    for start in range(0, len(items), ENCODE_ROWS):
        some = items[start : start + ENCODE_ROWS]
        at = len(record)
        _encoder.encode_into(some, record, -1)
        del record[at : at + len(_array_header(len(some)))]  # the slice's own header


def _array_header(length: int) -> bytes:
    """MessagePack's header of an array of `length` items."""
    if length < 16:
        return bytes((0x90 | length,))
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def _sorted_keys(keys: list[OrderKey], rows: dict[OrderKey, Row]) -> list[OrderKey]:
    """The keys of `rows` in order; `keys` (the same keys, in the rows' order) is taken
    as it is when already in order, as a load read in time order mostly is. Checked a slice
    at a time; a sort, when needed, is one C call over them all."""
    if len(keys) != len(rows):  # a key twice: the load is refused after, but made right
        return sorted(rows)
    for start in range(0, len(keys), CHECK_ROWS):
        some = keys[start : start + CHECK_ROWS + 1]  # one past: the slices' seam too
        if not all(map(le, some, islice(some, 1, None))):
            return sorted(keys)
    return keys


def _ascending(keys: list[OrderKey]) -> bool:
    """True when `keys` rise strictly (sorted and distinct), checked a slice at a time."""
    return all(
        all(map(lt, some, islice(some, 1, None)))
        for some in (
            keys[start : start + CHECK_ROWS + 1]  # one past: the slices' seam too
            for start in range(0, len(keys), CHECK_ROWS)
        )
    )


def let_go(*lists: list[Any]) -> None:
    """Empty each of `lists`, `SLICE_ROWS` items at a time from its end. A list of a million
    items let go at once is one step over them all (5 ms of thread CPU when its items live
    on, 27 ms when they die with it), in which no other thread gets the interpreter lock.
    Only for lists no one else reads."""
    for items in lists:
        while items:
            del items[-SLICE_ROWS:]


def _distinct(rows: Sequence[tuple[Any, ...]], position: int) -> frozenset[Any]:
    """The distinct values at `position` of the rows, gathered a slice at a time: a
    frozenset of a million values' list is one C call over them all (27 ms measured)."""
    pick = itemgetter(position)
    seen: set[Any] = set()
    for start in range(0, len(rows), SLICE_ROWS):
        seen.update(map(pick, rows[start : start + SLICE_ROWS]))
    return frozenset(seen)


def _column(rows: Sequence[tuple[Any, ...]], position: int) -> list[Any]:
    """The values at `position` of each row, a slice at a time."""
    pick = itemgetter(position)
    return list(
        chain.from_iterable(
            map(pick, rows[start : start + SLICE_ROWS]) for start in range(0, len(rows), SLICE_ROWS)
        )
    )


def still_fits(load: PreparedLoad, tables: dict[str, Table]) -> bool:
    """True when the load may still merge into its table (the caller holds the write
    lock): the table is the committed one it was prepared for, with no secondary index.
    Whether the table holds a key of the load is found by the merge (`bulk_merge`)."""
    table = tables.get(load.key)
    return table is load.table and not table.secondary


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a while (as it was, after); nested, the
    outermost pause turns it back on.

    A load (a checkpoint's, an import's) makes millions of row tuples that live as long as
    their table: the collector would look at them again and again while they are made and
    can free none of them, and each of its passes stops every thread of the server (young
    passes of 5 to 13 ms and older ones of 29 ms measured during a 1,000,000-row import).
    Reference counting still frees everything else at once.
    """
    if not gc.isenabled():  # paused already, by a caller: theirs to turn back on
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def quick_switches() -> Iterator[None]:
    """The interpreter's switch interval at most `LOAD_SWITCH_SECONDS` for a while (as it
    was, after); nested, the outermost one sets it back.

    A load runs Python for seconds without letting the interpreter lock go. A thread that
    wakes meanwhile (a request whose bytes came, a commit's flusher) waits one whole switch
    interval before the loading thread is asked to let go, and another one when it lets the
    lock go for a system call (reading the request) and the loading thread takes it first
    (5 to 14% of the reads measured). Shorter while a load runs only: a switch costs the
    loading thread only when another thread is waiting, so it pays for the waits it
    shortens (its CPU about the same; on a busy machine, each lock it gets back may wait for
    a CPU), and the server keeps its interval when nothing loads. Two loads at once: the
    first to end sets the interval back while the other still runs (which then switches as
    an idle server does).
    """
    before = sys.getswitchinterval()
    if before <= LOAD_SWITCH_SECONDS:  # short already (by a caller, or the process)
        yield
        return
    sys.setswitchinterval(LOAD_SWITCH_SECONDS)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def freeze_if_many(rows: int) -> None:
    """After `rows` rows were made with the collector paused: when they are `FREEZE_ROWS`
    or more, everything made so far is frozen out of the collector (`gc.freeze`).

    Were these objects still young when the collector is turned back on, its next young
    pass would go over every one of them, stopping every thread for hundreds of
    milliseconds (430 ms measured at 1,000,000 rows). Frozen, no pass looks at them, and
    reference counting still frees them (tuples of values hold no cycle).
    """
    if rows >= FREEZE_ROWS:
        gc.freeze()
