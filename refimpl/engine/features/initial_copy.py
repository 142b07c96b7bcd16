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
out of the table (C-level slices, no Python step per row); their keys are made after, by
C-level maps, and the rows stay a block (`CopiedRows`) that a protocol layer encodes as a
whole: a change and a position per row are made only when `InitialBatch.items` asks.
A point feed's copy (`FeedFilter.point`) is its one row read by its key, or one initial
change whose cells are all NULL when the row is missing (the protocol layers show it as
`"row": null`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import msgspec

from refimpl.engine.features.change_stream import (
    UNLOGGED,
    Change,
    chunks,
    read_runs,
    row_mapper,
)
from refimpl.engine.features.event_cursor import INITIAL, row_key
from refimpl.engine.features.feed_options import FeedFilter, filter_change
from refimpl.engine.query.deadlines import make_way
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.errors import BadRequest, InvalidValue

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

_encoder = msgspec.msgpack.Encoder()
Place = tuple[tuple[Any, ...], tuple[Any, ...]]  # (partition, order key) of a row
_Scalar = None | bool | int | float | str  # the values a column holds (spec: column types)
# What a place can be: a partition of scalars, an order key of scalars and (is NULL, value)
# pairs. Decoding to this type refuses a crafted id of another shape or depth at once.
_PlaceShape = tuple[tuple[_Scalar, ...], tuple[_Scalar | tuple[bool, _Scalar], ...]]
_decoder = msgspec.msgpack.Decoder(_PlaceShape)


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
        raise BadRequest(
            f"{what} must be a position this feed gave out, <lsn> or <lsn>:<hex>, not '{text[:40]}'"
        )
    lsn = int(lsn_text)
    if not colon:
        return lsn
    try:
        place = _decoder.decode(bytes.fromhex(place_text))
    except (ValueError, msgspec.DecodeError):
        raise BadRequest(
            f"{what} '{text[:40]}' names no place in a copy: send back the id the feed gave out"
        ) from None
    return CopyPosition(lsn, place)


def check_place(schema: TableSchema, position: CopyPosition, what: str) -> None:
    """`BadRequest` unless `position`'s place has the shape and value types of a place of
    `schema`'s table, so that it compares with every row's (a crafted id may decode to a
    place of another table, whose values a comparison refuses)."""
    sample = Table(schema)
    row = tuple(_SAMPLES[column.type] for column in schema.columns)
    part, order = sample.place(row, sample.ident_of(row))
    given_part, given_order = position.place
    if not (
        len(given_part) == len(part)
        and len(given_order) == len(order)
        and all(map(_comparable, given_part, part))
        and all(map(_comparable, given_order, order))
    ):
        raise BadRequest(
            f"{what} '{position.event_id()[:40]}' names no place in a copy of"
            f" '{schema.name}': send back the id this feed gave out"
        )


# A value of each column type, for a sample place (spec: column types).
_SAMPLES: dict[str, Any] = {
    "INT": 0,
    "BIGINT": 0,
    "TIMESTAMP": 0,
    "DOUBLE": 0.0,
    "STRING": "",
    "SYMBOL": "",
    "BOOLEAN": False,
}


def _comparable(given: Any, sample: Any) -> bool:
    """Whether `given` orders against the values a place holds where `sample` is."""
    if isinstance(sample, tuple):  # (is NULL, value) of a column that may be NULL
        return given == (True, None) or (
            isinstance(given, tuple) and given[0] is False and _comparable(given[1], sample[1])
        )
    if isinstance(given, tuple) or (given is None) != (sample is None):
        return False
    try:
        given < sample  # noqa: B015 - only whether the two order at all
    except TypeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class InitialItem:
    change: Change  # op INITIAL for a copied row (its lsn the page's), else a change
    # Where the feed stands once the reader has this item; None inside a transaction.
    position: CopyPosition | int | None


@dataclass(slots=True)
class CopiedRows:
    """A page's copied rows as the table holds them, on the feed's columns: taken, keyed
    and placed by C-level maps (in chunks, see CHUNK_ROWS), with no Python step per row
    (but a filter's)."""

    lsn: int  # the page's: each row is an initial change at it
    rows: list[tuple]
    keys: list[str]  # each row's hex key (the `key` of its change)
    places: list[Place]  # each row's place: the copy stands there once the reader has it
    ends_copy: bool  # the last row ends the copy: the position after it is `lsn`
    full: bool  # the table keeps before-images: a change ends with its old row (None)

    def changes(self) -> list[Change]:
        """The rows as initial changes."""
        old = None if self.full else UNLOGGED
        return [
            Change(self.lsn, seq, None, INITIAL, key, row, old)
            for seq, (row, key) in enumerate(zip(self.rows, self.keys, strict=True))
        ]

    def positions(self) -> list[CopyPosition | int]:
        """Where the feed stands after each row."""
        made: list[CopyPosition | int] = [CopyPosition(self.lsn, p) for p in self.places]
        if self.ends_copy and made:
            made[-1] = self.lsn
        return made

    def event_ids(self) -> list[str]:
        """Each row's position as an id (`CopyPosition.event_id`), made in C."""
        ids: list[str] = []
        for chunk in chunks(self.places):
            make_way()
            ids += map(f"{self.lsn}:".__add__, map(bytes.hex, map(_encoder.encode, chunk)))
        if self.ends_copy and ids:
            ids[-1] = str(self.lsn)
        return ids


@dataclass(slots=True)
class InitialBatch:
    changes: list[InitialItem]  # the stream's changes given before the rows
    copied: CopiedRows | None  # the page's rows, after the changes
    position: CopyPosition | int  # where to go on (the last item's, or the one asked for)
    copying: bool  # the copy is not over: the ready state has not come yet

    @property
    def items(self) -> list[InitialItem]:
        """The changes, then the rows as changes, each with the position after it."""
        if self.copied is None:
            return list(self.changes)
        rows = self.copied
        return [*self.changes, *map(InitialItem, rows.changes(), rows.positions())]


def read_initial(
    database: Database,
    schema: TableSchema,
    at: CopyPosition | None,
    limit: int,
    feed_filter: FeedFilter | None,
) -> InitialBatch:
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
        check_place(schema, at, "the position")
        batch = read_runs(database, schema.name, schema, at.lsn, limit).change_batch()
        _add_changes(items, batch.changes, schema, at.place, feed_filter)
        after_lsn = batch.next_lsn
        if batch.more:  # many changes since the last page: those first, the copy after
            return InitialBatch(items, None, CopyPosition(after_lsn, at.place), True)
    (rows, places, done), page_lsn, held = _page_table(database, schema, at, limit)
    if at is not None and page_lsn > after_lsn:
        # Commits between the read above and the page: the page has them for its rows.
        batch = read_runs(
            database,
            schema.name,
            schema,
            after_lsn,
            None,
            unbounded_limit=None,
            through_lsn=page_lsn,
        ).change_batch()
        _add_changes(items, batch.changes, schema, at.place, feed_filter)
    shape = row_mapper(held, schema.column_names)
    if shape is not None:  # the table's columns changed since the feed was described
        rows = [shape(row) for row in rows]
    # Rows the filter leaves out still move the copy on: the page's last place.
    position: CopyPosition | int = page_lsn if done else CopyPosition(page_lsn, places[-1])
    ends_copy = done
    if feed_filter is not None:
        kept = [index for index, row in enumerate(rows) if feed_filter.matches(row)]
        ends_copy = done and bool(kept) and kept[-1] == len(rows) - 1
        rows, places = [rows[i] for i in kept], [places[i] for i in kept]
    copied = CopiedRows(
        page_lsn, rows, _keys(schema, rows), places, ends_copy, schema.replica_identity_full
    )
    return InitialBatch(items, copied, position, not done)


def _keys(schema: TableSchema, rows: list[tuple]) -> list[str]:
    """The hex key of each row (`row_key`), made in C where no partition is in it."""
    layout = schema.layout()
    positions = layout.key_positions
    if layout.period is None and layout.symbol_position is None:
        head = b"\x92\x90"  # MessagePack [[], identity]: the partition part is empty
        keys: list[str] = []
        for chunk in chunks(rows):
            make_way()
            idents = zip(*(map(itemgetter(p), chunk) for p in positions), strict=True)
            keys += map(bytes.hex, map(head.__add__, map(_encoder.encode, idents)))
        return keys
    return [row_key(schema, row, tuple(row[p] for p in positions)) for row in rows]


def _point_copy(database: Database, schema: TableSchema, feed_filter: FeedFilter) -> InitialBatch:
    """A point feed's copy: its one row by its key, or, when it is missing (or the rest of
    the predicate leaves it out), one initial change with a null row, as the document's
    point feeds send."""
    point = feed_filter.point
    assert point is not None
    with database.state_lock:
        table = database.committed_table(schema.name)
        lsn = database.applied_lsn
        row = table.get(point.ident)
    if database.log.durable_lsn < lsn:
        database.log.wait_durable(lsn)
    width = len(schema.columns)
    cells = tuple(row[:width]) if row is not None and feed_filter.matches(row) else None
    old = None if schema.replica_identity_full else UNLOGGED
    change = Change(lsn, 0, None, INITIAL, point.key, cells or (None,) * width, old)
    return InitialBatch([InitialItem(change, lsn)], None, lsn, False)


def _page_table(
    database: Database, schema: TableSchema, at: CopyPosition | None, limit: int
) -> tuple[tuple[list, list, bool], int, tuple[str, ...]]:
    """Up to `limit` rows after `at.place` and their places, the LSN they are at and the
    columns they are on (the table's then); durable before return."""
    with database.state_lock:
        table = database.committed_table(schema.name)
        lsn = database.applied_lsn
        rows, spans, done = _rows_after(table, None if at is None else at.place, limit)
    if database.log.durable_lsn < lsn:
        database.log.wait_durable(lsn)  # the page may hold a commit not yet on disk
    places: list[Place] = []
    for part, orders in spans:
        for chunk in chunks(orders):
            make_way()  # no lock is held here: the rows were taken under it
            places += zip(repeat(part), chunk)
    return (rows, places, done), lsn, table.schema.column_names


def _rows_after(
    table: Table, place: Place | None, limit: int
) -> tuple[list, list[tuple[Any, list]], bool]:
    """The rows after `place`, in the table's order, and the order keys they were taken at,
    a list per partition. Called under the state lock: the rows are taken by slices of each
    partition's sorted keys and C-level lookups, never a Python step per row, so that
    writers wait microseconds per thousand rows, not milliseconds; their places are made
    after the lock."""
    rows: list[tuple] = []
    spans: list[tuple[Any, list]] = []
    partitions = table.partitions
    start_part = None if place is None else place[0]
    for part in partitions.irange(minimum=start_part):
        partition = partitions[part]
        start = 0
        if place is not None and part == place[0]:
            start = partition.bisect_right(place[1])
        wanted = limit - len(rows)
        orders = partition.keys()[start : start + wanted + 1]
        more = len(orders) > wanted
        if more:
            del orders[wanted:]
        for chunk in chunks(orders):
            rows += partition.rows_for(chunk)
        spans.append((part, orders))
        if more:
            return rows, spans, False
        if len(rows) == limit and part != partitions.keys()[-1]:
            return rows, spans, False
    return rows, spans, True


def _add_changes(
    items: list[InitialItem],
    changes: Sequence[Change],
    schema: TableSchema,
    place: Place,
    feed_filter: FeedFilter | None,
) -> None:
    """The changes the reader must get: those of rows at or before `place` (see above), as
    the filter shows them; the last one of each transaction carries its position."""
    placer = Table(schema)  # for `place` only: where a row would stand
    given = []
    for change in changes:
        if not _given(change, placer, place):
            continue
        if feed_filter is not None:
            filtered = filter_change(change, schema, feed_filter)
            if filtered is None:
                continue
            change = filtered
        given.append(change)
    for index, change in enumerate(given):
        last = index + 1 == len(given) or given[index + 1].lsn != change.lsn
        items.append(InitialItem(change, CopyPosition(change.lsn, place) if last else None))


def _given(change: Change, placer: Table, place: Place) -> bool:
    op, old = change.op, change.old
    if op == "ddl":
        return True
    if op == "delete":
        # Without its old row only the key is logged: a reader ignores a key it does not hold.
        return old is UNLOGGED or old is None or _at_or_before(placer, old, place)
    if _at_or_before(placer, change.row, place):
        return True
    # A row that moved on past the place: the reader holds it where it stood.
    return isinstance(old, tuple) and _at_or_before(placer, old, place)


def _at_or_before(placer: Table, row: Sequence[Any], place: Place) -> bool:
    tuple_row = tuple(row)
    return placer.place(tuple_row, placer.ident_of(tuple_row)) <= place
