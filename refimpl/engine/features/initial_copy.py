"""`initial=true`: a table's rows, then its changes, without holding writers back (spec:
changefeeds, initial).

The copy is read in pages, in the table's own order (partition, then order key), each page
under the state lock for that page only. A position inside the copy (`CopyPosition`) says
"the rows up to this place, as they were at this LSN": a change after that LSN is given to
the reader when it is about a row at or before the place (the reader has that row), and
left out otherwise (the row comes later in the copy, as it is then). So the rows given plus
the changes given rebuild exactly the table, at every position, whatever the page sizes; the
copy ends at the LSN of its last page, and the change stream goes on from there.

What a caller may rely on: `read_initial` answers whole transactions and whole rows, each
item with the position just after it (`InitialItem.position`), a page's rows only once
durable, and only tables with a key (a row of a table without one has no identity the copy
and the stream share: `InvalidValue`). The state lock is held only to slice the page's rows
out of the table (C-level slices, no Python step per row); keys and changes are made after.
A point feed's copy (`FeedFilter.point`) is its one row read by its key, or one initial
change whose cells are all NULL when the row is missing (the protocol layers show it as
`"row": null`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from refimpl.engine.features.change_stream import (
    OP,
    ROW,
    UNLOGGED,
    Change,
    read_changes,
)
from refimpl.engine.features.event_stream import row_key
from refimpl.engine.features.feed_options import FeedFilter, filter_change
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.errors import BadRequest, InvalidValue, UnknownTable

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

INITIAL = "initial"
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()
Place = tuple[tuple[Any, ...], tuple[Any, ...]]  # (partition, order key) of a row


@dataclass(frozen=True, slots=True)
class CopyPosition:
    """Inside the copy: the rows up to `place` are given, as they were at `lsn`."""

    lsn: int
    place: Place

    def event_id(self) -> str:
        """`<lsn>:<hex>`: the LSN, then the place as hex of MessagePack (spec: the id)."""
        return f"{self.lsn}:{_encoder.encode(list(self.place)).hex()}"


def parse_position(text: str, what: str) -> CopyPosition | int:
    """A position of an `initial=true` feed: `<lsn>` (past the copy) or `<lsn>:<hex>`."""
    lsn_text, colon, place_text = text.strip().partition(":")
    if not (lsn_text.isascii() and lsn_text.isdigit() and len(lsn_text) <= 19):
        raise BadRequest(f"{what} must be a position this feed gave out, <lsn> or <lsn>:<hex>,"
                         f" not '{text[:40]}'")
    lsn = int(lsn_text)
    if not colon:
        return lsn
    try:
        part, order = _decoder.decode(bytes.fromhex(place_text))
    except (ValueError, TypeError, msgspec.DecodeError):
        raise BadRequest(f"{what} '{text[:40]}' names no place in a copy: send back the id"
                         " the feed gave out") from None
    return CopyPosition(lsn, (_tuples(part), _tuples(order)))


def _tuples(value: Any) -> Any:
    """MessagePack gives lists back: the place's keys compare as the tuples they were."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


@dataclass(frozen=True, slots=True)
class InitialItem:
    change: Change  # op INITIAL for a copied row (its lsn the page's), else a change
    # Where the feed stands once the reader has this item; None inside a transaction.
    position: CopyPosition | int | None


@dataclass(slots=True)
class InitialBatch:
    items: list[InitialItem]
    position: CopyPosition | int  # where to go on (the last item's, or the one asked for)
    copying: bool  # the copy is not over: the ready state has not come yet


def read_initial(database: Database, schema: TableSchema, at: CopyPosition | None, limit: int,
                 feed_filter: FeedFilter | None) -> InitialBatch:  # fmt: skip
    """The next items of a copy from `at` (None: from its start), about `limit` of them."""
    if not schema.layout().key_positions:
        raise InvalidValue(
            f"initial=true needs a table with a PRIMARY KEY or DEDUP KEY; '{schema.name}' has"
            " neither, so its rows have no identity shared by the copy and the stream"
        )
    if at is None and feed_filter is not None and feed_filter.point is not None:
        return _point_copy(database, schema, feed_filter)
    items: list[InitialItem] = []
    after_lsn = 0
    if at is not None:
        batch = read_changes(database, schema.name, schema, at.lsn, limit)
        _add_changes(items, batch.changes, schema, at.place, feed_filter)
        after_lsn = batch.next_lsn
        if batch.more:  # many changes since the last page: those first, the copy after
            return InitialBatch(items, CopyPosition(after_lsn, at.place), True)
    table, page_lsn = _page_table(database, schema, at, limit)
    rows, places, done = table
    if at is not None and page_lsn > after_lsn:
        # Commits between the read above and the page: the page has them for its rows.
        batch = read_changes(database, schema.name, schema, after_lsn, None,
                             unbounded_limit=None, through_lsn=page_lsn)
        _add_changes(items, batch.changes, schema, at.place, feed_filter)
    width = len(schema.columns)
    end = (None,) if schema.replica_identity_full else ()
    seq = 0
    key_of = _key_maker(schema)
    for index, (row, place) in enumerate(zip(rows, places, strict=True)):
        if feed_filter is not None and not feed_filter.matches(row):
            continue
        last = index + 1 == len(rows)
        position = page_lsn if last and done else CopyPosition(page_lsn, place)
        change = (page_lsn, seq, None, INITIAL, key_of(row), *row[:width], *end)
        items.append(InitialItem(change, position))
        seq += 1
    if done:
        return InitialBatch(items, page_lsn, False)
    # Rows the filter left out still move the copy on: the page's last place.
    return InitialBatch(items, CopyPosition(page_lsn, places[-1]), True)


def _key_maker(schema: TableSchema) -> Callable[[Sequence[Any]], str]:
    """The hex key of a row (`row_key`), with the schema's layout looked at once."""
    layout = schema.layout()
    positions = layout.key_positions
    if layout.period is None and layout.symbol_position is None:
        head = b"\x92\x90"  # MessagePack [[], identity]: the partition part is empty
        return lambda row: (head + _encoder.encode([row[p] for p in positions])).hex()
    return lambda row: row_key(schema, row, tuple(row[p] for p in positions))


def _point_copy(database: Database, schema: TableSchema, feed_filter: FeedFilter
                ) -> InitialBatch:  # fmt: skip
    """A point feed's copy: its one row by its key, or, when it is missing (or the rest of
    the predicate leaves it out), one initial change with a null row, as the document's
    point feeds send."""
    point = feed_filter.point
    assert point is not None
    with database.state_lock:
        table = database.tables.get(schema.name.lower())
        if table is None:
            raise UnknownTable(schema.name)
        lsn = database.applied_lsn
        row = table.get(point.ident)
    if database.log.durable_lsn < lsn:
        database.log.wait_durable(lsn)
    width = len(schema.columns)
    cells = tuple(row[:width]) if row is not None and feed_filter.matches(row) else None
    change = (lsn, 0, None, INITIAL, point.key, *(cells or (None,) * width))
    if schema.replica_identity_full:
        change = (*change, None)
    return InitialBatch([InitialItem(change, lsn)], lsn, False)


def _page_table(database: Database, schema: TableSchema, at: CopyPosition | None,
                limit: int) -> tuple[tuple[list, list, bool], int]:  # fmt: skip
    """Up to `limit` rows after `at.place` and the LSN they are at; durable before return."""
    with database.state_lock:
        table = database.tables.get(schema.name.lower())
        if table is None:
            raise UnknownTable(schema.name)
        lsn = database.applied_lsn
        page = _rows_after(table, None if at is None else at.place, limit)
    if database.log.durable_lsn < lsn:
        database.log.wait_durable(lsn)  # the page may hold a commit not yet on disk
    return page, lsn


def _rows_after(table: Table, place: Place | None, limit: int) -> tuple[list, list, bool]:
    """The rows after `place`, in the table's order. Called under the state lock: the rows
    are taken by slices of each partition's sorted keys and C-level lookups, never a Python
    step per row, so that writers wait microseconds per thousand rows, not milliseconds."""
    rows: list[tuple] = []
    places: list[Place] = []
    partitions = table.partitions
    start_part = None if place is None else place[0]
    for part in partitions.irange(minimum=start_part):
        partition = partitions[part]
        start = 0
        if place is not None and part == place[0]:
            start = partition.bisect_right(place[1])
        wanted = limit - len(rows)
        orders = partition.keys()[start:start + wanted + 1]
        more = len(orders) > wanted
        if more:
            del orders[wanted:]
        rows += map(partition.__getitem__, orders)
        places += zip(itertools.repeat(part), orders)
        if more:
            return rows, places, False
        if len(rows) == limit and part != partitions.keys()[-1]:
            return rows, places, False
    return rows, places, True


def _add_changes(items: list[InitialItem], changes: Sequence[Change], schema: TableSchema,
                 place: Place, feed_filter: FeedFilter | None) -> None:  # fmt: skip
    """The changes the reader must get: those of rows at or before `place` (see above), as
    the filter shows them; the last one of each transaction carries its position."""
    full = schema.replica_identity_full
    width = len(schema.columns)
    placer = Table(schema)  # for `place` only: where a row would stand
    given = []
    for change in changes:
        if not _given(change, placer, place, full, width):
            continue
        if feed_filter is not None:
            change = filter_change(change, schema, feed_filter)
            if change is None:
                continue
        given.append(change)
    for index, change in enumerate(given):
        last = index + 1 == len(given) or given[index + 1][0] != change[0]
        items.append(InitialItem(change, CopyPosition(change[0], place) if last else None))


def _given(change: Change, placer: Table, place: Place, full: bool, width: int) -> bool:
    op = change[OP]
    if op == "ddl":
        return True
    old = change[-1] if full else UNLOGGED
    if op == "delete":
        # Without its old row only the key is logged: a reader ignores a key it does not hold.
        return old is UNLOGGED or old is None or _at_or_before(placer, old, place)
    if _at_or_before(placer, change[ROW:ROW + width], place):
        return True
    # A row that moved on past the place: the reader holds it where it stood.
    return isinstance(old, tuple) and _at_or_before(placer, old, place)


def _at_or_before(placer: Table, row: Sequence[Any], place: Place) -> bool:
    tuple_row = tuple(row)
    return placer.place(tuple_row, placer.ident_of(tuple_row)) <= place
