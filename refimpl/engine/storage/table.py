"""Rows of one table in sortedcontainers structures, keyed by (partition, order).

A `Table` is mutated only by the database's one writer, and read by many readers under the
database's state lock. Each partition's rows are `blocks.Blocks`, shared copy-on-write: a
scan takes them under the lock in O(blocks) and is read after it (see `blocks` for why),
and `clone()` gives a twin that a transaction changing the schema (or dropping partitions)
works on privately until it commits.

A table loaded from a checkpoint whose rows sit in one partition ordered by identity alone
(no TIMESERIES, SYMBOL partition or ORDER BY) and without secondary indexes keeps its
checkpoint's chunks encoded, a block each, decoded at first touch (see `blocks`), and keeps
no identity index of its own: its one partition, keyed by identity, is the index
(`OrderIndex`). So its open makes no Python object per row, and a checkpoint of it writes
the chunks still encoded as they are (`detached_parts`), decoding none.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress, groupby
from operator import itemgetter, lt, not_
from typing import Any

from sortedcontainers import SortedDict

from refimpl.engine.storage.blocks import Blocks, Opener
from refimpl.engine.storage.checkpoint import Chunk, TableImage, decode_chunk
from refimpl.engine.storage.ident_index import SHARD_AT, OrderIndex, ShardedIndex, sharded
from refimpl.engine.storage.indexes import SecondaryIndex, build_indexes
from refimpl.engine.storage.placement import Placements, Placer, placements, placer
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import NotNullViolation, SqlError

Row = tuple[Any, ...]
Ident = tuple[Any, ...]
PartKey = tuple[Any, ...]
OrderKey = tuple[Any, ...]
# Rows placed at a time by `put_many`: each slice's C calls (a few milliseconds) leave the
# interpreter lock to other threads in between.
_SLICE_ROWS = 4096
Index = dict[Ident, tuple[PartKey, OrderKey]] | OrderIndex | ShardedIndex


class Journal(list[Ident]):
    """The identities a table's writes changed while a bulk load merged into a snapshot of
    it (`Table.journals`), in the order written, repeats included; `stale` when a write
    changed more than identities can say (a partition dropped, the table emptied, another
    load installed): the load then merges again from a new snapshot."""

    __slots__ = ("stale",)

    def __init__(self) -> None:
        super().__init__()
        self.stale = False


class Table:
    """The rows of one table."""

    __slots__ = (
        "schema",
        "layout",
        "partitions",
        "index",
        "secondary",
        "journals",
        "next_rowid",
        "_wrap",
        "keyed",
        "place",
        "place_all",
    )

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.layout = schema.layout()
        self.partitions: SortedDict = SortedDict()
        self.index: Index = {}
        # Secondary indexes (CREATE INDEX, UNIQUE): lower-case name -> index, kept current
        # by every change below.
        self.secondary: dict[str, SecondaryIndex] = build_indexes(
            schema.all_indexes(), schema.positions
        )
        self.next_rowid = 1
        # The journals of the bulk loads merging into a snapshot of this table: every write
        # records the identities it changes in each (see `Journal`).
        self.journals: list[Journal] = []
        not_null = {position for position, _ in self.layout.not_null}
        self._wrap = tuple(p not in not_null for p in self.layout.order_positions)
        # True when rows are identified by key columns, False when by row ids; never changed
        # (a slot, not a property: a one-row INSERT's commit reads it).
        self.keyed = bool(self.layout.key_positions)
        # `place(row, ident)`: where a row with this identity lives, its partition and its
        # order key.
        self.place: Placer = placer(self.layout, self._wrap)
        # `place_all(rows, idents)`: `place` of many rows at once, as two lists.
        self.place_all: Placements = placements(self.layout, self._wrap)

    # -- identity and placement ----------------------------------------------------------

    def ident_of(self, row: Row) -> Ident:
        """The identity of a row of a keyed table."""
        return tuple(row[p] for p in self.layout.key_positions)

    def check_not_null(self, row: Row) -> None:
        for position, name in self.layout.not_null:
            if row[position] is None:
                raise NotNullViolation(
                    f"column '{name}' of table '{self.schema.name}' cannot be NULL"
                )

    # -- reads ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.index)

    def get(self, ident: Ident) -> Row | None:
        where = self.index.get(ident)
        if where is None:
            return None
        return self.partitions[where[0]][where[1]]

    def scan(
        self,
        parts: Iterable[PartKey] | None = None,
        lead_low: int | None = None,
        lead_high: int | None = None,
    ) -> Iterator[Row]:
        """Rows in (partition, order) order; only the given partitions when named.

        The rows are those of the moment of the call, taken in O(partitions + blocks): the
        caller holds the state lock for the call only, and may read the iterator after
        letting it go, whatever commits meanwhile (so a long scan holds no commit).

        With inclusive integer bounds on the leading column (`RowLayout.lead_position`: a
        table without one ignores them), each partition is read from the first row in
        range to the last. The caller filters the rows anyway.
        """
        chosen = (
            self.partitions.values()
            if parts is None
            else filter(None, map(self.partitions.get, parts))
        )
        low, high = self.lead_range(lead_low, lead_high)
        return chain.from_iterable([partition.detached(low, high) for partition in chosen])

    def lead_range(
        self, lead_low: int | None, lead_high: int | None
    ) -> tuple[OrderKey | None, OrderKey | None]:
        """The order keys [low, high) of the rows whose leading column is within the
        inclusive integer bounds (None: no bound, also for a table without that column)."""
        if self.layout.lead_position is None:
            return None, None
        return (
            None if lead_low is None else (lead_low,),
            None if lead_high is None else (lead_high + 1,),
        )

    def scan_with_idents(self) -> Iterator[tuple[Ident, Row]]:
        """(identity, row) pairs in (partition, order) order, read under the lock."""
        key_count = len(self.layout.key_positions) or 1
        for partition in self.partitions.values():
            for order, row in partition.items():
                yield order[-key_count:], row

    def detached_with_idents(self) -> Iterator[tuple[Ident, Row]]:
        """`scan_with_idents` as of the moment of the call, taken as `scan` takes its rows:
        the iterator may be read after the lock (a writer then copies a block it writes)."""
        key_count = len(self.layout.key_positions) or 1
        items = chain.from_iterable(
            [partition.detached_items() for partition in self.partitions.values()]
        )
        return ((order[-key_count:], row) for order, row in items)

    def text_length(self, positions: Sequence[int]) -> int:
        """The characters of every row's non-empty values at `positions` (text columns'),
        without decoding a block still encoded (its checkpoint stored its count)."""
        return sum(partition.text_length(positions) for partition in self.partitions.values())

    def index_for(self, columns: Iterable[str]) -> SecondaryIndex | None:
        """An index whose leading columns are these (in any order), the shortest such;
        None when no index serves a lookup by them. The typed seam for joins and plans."""
        wanted = {c.lower() for c in columns}
        fits = [
            index
            for index in self.secondary.values()
            if {c.lower() for c in index.definition.columns[: len(wanted)]} == wanted
        ]
        return min(fits, key=lambda i: len(i.positions), default=None)

    def rows_of(self, idents: Iterable[Ident]) -> list[Row]:
        """The rows of these identities (missing ones skipped), in table order."""
        places = sorted(filter(None, map(self.index.get, idents)))  # (part, order) pairs
        rows: list[Row] = []
        for part, orders in groupby(places, itemgetter(0)):
            rows += self.partitions[part].rows_for([order for _, order in orders])
        return rows

    def part_of_ident(self, ident: Ident) -> PartKey | None:
        where = self.index.get(ident)
        return None if where is None else where[0]

    # -- writes (the one writer only) ----------------------------------------------------

    def allocate_rowid(self) -> int:
        rowid = self.next_rowid
        self.next_rowid += 1
        return rowid

    def put(self, ident: Ident, row: Row) -> Row | None:
        """Store a row under its identity, replacing (and maybe moving) an older one."""
        if not self.keyed and ident[0] >= self.next_rowid:
            self.next_rowid = ident[0] + 1
        old = self.index.get(ident)
        previous = None
        if old is not None:
            held = self.partitions[old[0]]
            previous = held.pop(old[1])
            if not held:
                del self.partitions[old[0]]
        part, order = self.place(row, ident)
        self._partition(part)[order] = row
        index = self.index
        index[ident] = (part, order)
        if old is None and type(index) is dict and len(index) >= SHARD_AT:
            self.index = sharded(index)
        for journal in self.journals:
            journal.append(ident)
        for secondary in self.secondary.values():
            if previous is not None:
                secondary.remove(previous, ident)
            secondary.add(row, ident)
        return previous

    def put_new(self, ident: Ident, row: Row) -> None:
        """`put` of a row whose identity the table does not hold (a one-row INSERT's commit,
        which looked it up): no look-up of an older row to replace."""
        if not self.keyed and ident[0] >= self.next_rowid:
            self.next_rowid = ident[0] + 1
        part, order = self.place(row, ident)
        partition = self.partitions.get(part)
        if partition is None:
            partition = self.partitions[part] = Blocks()
        partition[order] = row
        index = self.index
        index[ident] = (part, order)
        if type(index) is dict and len(index) >= SHARD_AT:
            self.index = sharded(index)
        for journal in self.journals:
            journal.append(ident)
        for secondary in self.secondary.values():
            secondary.add(row, ident)

    def put_many(self, idents: Sequence[Ident], rows: Sequence[Row]) -> None:
        """`put` of each identity's row in turn, the identities distinct, in fewer steps.

        Rows of identities the table does not hold (an import's, say) are placed all at once
        (`place_all`) and go into each partition a batch at a time: one merge of its sorted
        keys, where `put` makes a sorted insert per row. A row that replaces another, and
        every row of a table with secondary indexes, goes by `put`.
        """
        index = self.index
        # One row (an INSERT's) costs less by `put` than by the batch's lists and merges.
        if self.secondary or len(idents) == 1:
            for ident, row in zip(idents, rows, strict=True):
                self.put(ident, row)
            return
        held = list(map(index.__contains__, idents))
        if any(held):
            for ident, row in compress(zip(idents, rows, strict=True), held):
                self.put(ident, row)
            fresh = list(map(not_, held))
            idents, rows = list(compress(idents, fresh)), list(compress(rows, fresh))
        # In slices, so that no one C call holds the interpreter lock for long (other
        # requests wait for it), and no list of a million keys is made for the collector to
        # go over again and again.
        for journal in self.journals:
            journal += idents
        if type(index) is dict and len(index) + len(idents) >= SHARD_AT:
            index = self.index = sharded(index)
        batches: dict[PartKey, dict[OrderKey, Row]] = {}
        for start in range(0, len(idents), _SLICE_ROWS):
            end = start + _SLICE_ROWS
            some_idents, some_rows = idents[start:end], rows[start:end]
            parts, orders = self.place_all(some_rows, some_idents)
            index.update(zip(some_idents, zip(parts, orders, strict=True), strict=True))
            _group_by_part(parts, orders, some_rows, batches)
        for part, batch in batches.items():
            self._partition(part).update(batch)
        if not self.keyed and idents:
            self.next_rowid = max(self.next_rowid, max(idents)[0] + 1)

    def install_prepared(
        self,
        partitions: dict[PartKey, tuple[Blocks, dict[OrderKey, Row]]],
        index: dict[Ident, tuple[PartKey, OrderKey]],
    ) -> None:
        """Add new rows prepared elsewhere (a bulk load's): `partitions` holds each
        partition's new rows, as blocks and as the dict of exactly those rows that the
        blocks borrow, and `index` each new identity's (partition, order key); all are taken
        over. The identities are new to the table; a table without key has had their ids
        reserved (`next_rowid` is past them).

        A prepared partition the table does not hold becomes its partition as it is, in
        O(1); one it holds takes the dict's rows in (`Blocks.update`: a sort of their keys,
        and a merge of the two when they fall among its own). Of the index, the smaller side
        is merged into the larger.
        """
        for part, (prepared, rows) in partitions.items():
            held = self.partitions.get(part)
            if held:
                held.update(rows)
            else:
                self.partitions[part] = prepared
        for journal in self.journals:
            journal.stale = True
        if isinstance(self.index, OrderIndex):  # the partition is the index
            return
        if type(self.index) is dict and len(self.index) + len(index) >= SHARD_AT:
            self.index = sharded(self.index)
        if len(index) > len(self.index) and type(self.index) is dict:
            index.update(self.index)
            self.index = index
        else:
            self.index.update(index.items())

    def load(self, idents: Sequence[Ident], rows: Sequence[Row]) -> None:
        """Fill an empty table with rows and their identities at once (a checkpoint's).

        Placing every row first and building each partition in one go is several times
        faster than `put` per row, which is what reopening a big table waits for.
        """
        for secondary in self.secondary.values():
            secondary.build(zip(idents, rows, strict=True))
        parts, orders = self.place_all(rows, idents)
        places = zip(idents, zip(parts, orders, strict=True), strict=True)
        self.index = ShardedIndex.of(places) if len(idents) >= SHARD_AT else dict(places)
        batches: dict[PartKey, dict[OrderKey, Row]] = {}
        _group_by_part(parts, orders, rows, batches)
        for part, batch in batches.items():
            self.partitions[part] = Blocks.from_dict(batch)
        if not self.keyed and idents:
            self.next_rowid = max(self.next_rowid, max(idents)[0] + 1)

    def load_rows(self, rows: list[Row], rowids: list[int] | None) -> None:
        """Fill an empty table with a checkpoint's rows (and row ids, for a table without
        key), as `load` does, computing identities and places without a call per row where
        the table's layout allows: one partition, ordered by identity alone."""
        layout = self.layout
        # zip of one iterable makes the 1-tuples at C speed
        if rowids is not None:
            idents: list[Ident] = list(zip(rowids))
        elif len(layout.key_positions) == 1:
            idents = list(zip(map(itemgetter(*layout.key_positions), rows)))
        else:
            idents = [self.ident_of(row) for row in rows]
        simple = (
            layout.period is None and layout.symbol_position is None and not layout.order_positions
        )
        if not simple or self.secondary:
            self.load(idents, rows)
            return
        self.index = OrderIndex(self)
        if rows:
            self.partitions[()] = Blocks.from_dict(dict(zip(idents, rows, strict=True)))
        if not self.keyed and idents:
            self.next_rowid = max(self.next_rowid, max(rowids or [0]) + 1)

    def load_image(self, image: TableImage) -> bool:
        """Fill an empty table with a checkpoint's image; True when its rows were decoded
        (then `image.rows` holds them), False when its chunks were taken encoded, to be
        decoded a block at a time at first touch (see the module docstring)."""
        chunks = image.chunks
        lasts = [] if chunks is None else [tuple(chunk.last) for chunk in chunks]
        simple = self.ordered_by_identity and not self.secondary
        if chunks is None or not simple or not all(map(lt, lasts, lasts[1:])):
            self.load_rows(image.rows, image.rowids)
            return True
        if not self.keyed and lasts:
            self.next_rowid = max(self.next_rowid, lasts[-1][0] + 1)
        parts = [(last, c.count, c.text, c) for last, c in zip(lasts, chunks, strict=True)]
        self.index = OrderIndex(self)
        if parts:
            self.partitions[()] = Blocks.from_encoded(parts, _opener(self.layout.key_positions))
        return False

    @property
    def ordered_by_identity(self) -> bool:
        """True when rows sit in one partition, `()`, ordered by identity alone: its order
        keys are the identities (no TIMESERIES, SYMBOL partition or ORDER BY)."""
        layout = self.layout
        return (
            layout.period is None and layout.symbol_position is None and not layout.order_positions
        )

    def detached_parts(self) -> Iterator[tuple[Chunk | None, list[OrderKey], Iterable[Row]]]:
        """The blocks of a table `ordered_by_identity`, as of the moment of the call, as
        `Blocks.detached_parts` gives them: a chunk still encoded as its checkpoint stored
        it, or a block's keys (the identities) and rows. Taken as `scan` takes its rows."""
        partition = self.partitions.get(())
        return iter(()) if partition is None else partition.detached_parts()

    def delete(self, ident: Ident) -> Row | None:
        where = self.index.pop(ident, None)
        if where is None:
            return None
        for journal in self.journals:
            journal.append(ident)
        partition = self.partitions[where[0]]
        row = partition.pop(where[1])
        if not partition:
            del self.partitions[where[0]]
        for secondary in self.secondary.values():
            secondary.remove(row, ident)
        return row

    def clear(self) -> int:
        removed = len(self.index)
        for journal in self.journals:
            journal.stale = True
        self.partitions = SortedDict()
        self.index = {}
        for secondary in self.secondary.values():
            secondary.clear()
        return removed

    def drop_partitions(self, parts: Iterable[PartKey]) -> int:
        """Remove whole partitions; returns the number of rows removed."""
        removed = 0
        key_count = len(self.layout.key_positions) or 1
        for journal in self.journals:
            journal.stale = True
        for part in list(parts):
            partition = self.partitions.pop(part, None)
            if partition is None:
                continue
            for order, row in partition.items():
                ident = order[-key_count:]
                del self.index[ident]
                for secondary in self.secondary.values():
                    secondary.remove(row, ident)
            removed += len(partition)
        return removed

    def _partition(self, part: PartKey) -> Blocks:
        """The partition `part`, made empty when the table has none."""
        partition = self.partitions.get(part)
        if partition is None:
            partition = self.partitions[part] = Blocks()
        return partition

    # -- copies --------------------------------------------------------------------------

    def clone(self) -> Table:
        """A twin sharing this table's partitions' blocks until either writes to one
        (copy-on-write): either may be written afterwards without changing the other."""
        return self.reindexed(self.schema)

    def reindexed(self, schema: TableSchema) -> Table:
        """A twin (as `clone`) of a schema differing at most in its indexes: the indexes both
        have are copied, new ones built from the rows."""
        twin = Table(schema)
        twin.partitions = SortedDict(
            (part, partition.copy()) for part, partition in self.partitions.items()
        )
        index = self.index
        if isinstance(index, OrderIndex):
            twin.index = OrderIndex(twin)
        else:
            twin.index = index.snapshot() if isinstance(index, ShardedIndex) else dict(index)
        twin.next_rowid = self.next_rowid
        for name, secondary in twin.secondary.items():
            mine = self.secondary.get(name)
            if mine is not None and mine.definition == secondary.definition:
                twin.secondary[name] = mine.copy()
            else:
                secondary.build(self.scan_with_idents())
        return twin

    def rebuilt(self, schema: TableSchema, convert: Any) -> Table:
        """A new table of `schema` holding `convert(row)` of every row (ADD/DROP COLUMN)."""
        twin = Table(schema)
        twin.next_rowid = self.next_rowid
        for ident, row in self.scan_with_idents():
            twin.put(ident, convert(row))
        return twin


def _opener(key_positions: tuple[int, ...]) -> Opener:
    """How a checkpoint chunk of a table keyed by these columns (none: by row id) becomes a
    block's keys and rows."""
    pick = itemgetter(*key_positions) if len(key_positions) > 1 else None
    one = itemgetter(key_positions[0]) if len(key_positions) == 1 else None

    def opened(chunk: Chunk) -> tuple[list[OrderKey], dict[OrderKey, Row]]:
        rows, rowids = decode_chunk(chunk.payload)
        if rowids is not None:
            keys: list[OrderKey] = list(zip(rowids))  # 1-tuples at C speed
        elif one is not None:
            keys = list(zip(map(one, rows)))
        else:
            assert pick is not None
            keys = list(map(pick, rows))
        return keys, dict(zip(keys, rows, strict=True))

    return opened


def _group_by_part(
    parts: list[PartKey],
    orders: list[OrderKey],
    rows: Sequence[Row],
    batches: dict[PartKey, dict[OrderKey, Row]],
) -> None:
    """Add placed rows to `batches`, grouped by partition: order key -> row for each."""
    if parts and parts.count(parts[0]) == len(parts):  # one partition: no step per row
        batches.setdefault(parts[0], {}).update(zip(orders, rows, strict=True))
        return
    for part, order, row in zip(parts, orders, rows, strict=True):
        batch = batches.get(part)
        if batch is None:
            batches[part] = batch = {}
        batch[order] = row


# Partition keys are (period,), (period, is_null, symbol) or (is_null, symbol): (period,
# _AFTER_PERIOD) sorts after every key of that period and before the next one's (a bool is
# an int below 2).
_AFTER_PERIOD = 2


def parts_for_period_range(
    table: Table, low: str | None, high: str | None, symbol: tuple[bool, str] | None
) -> list[PartKey]:
    """The partitions a time range (periods, inclusive) and a symbol value can touch, in
    partition order. Found by bisection over the sorted keys: with a symbol it costs a
    lookup per period in range, never a look at every partition."""
    partitions = table.partitions
    if table.layout.period is None:
        if symbol is None:
            return list(partitions.keys())
        return [symbol] if symbol in partitions else []
    keys = partitions.keys()
    at = 0 if low is None else partitions.bisect_left((low,))
    end = len(keys) if high is None else partitions.bisect_left((high, _AFTER_PERIOD))
    if symbol is None:
        return list(keys[at:end])
    result = []
    while at < end:
        period = keys[at][0]
        part = (period, *symbol)
        if part in partitions:
            result.append(part)
        at = partitions.bisect_left((period, _AFTER_PERIOD))
    return result


def partitions_named(table: Table, names: Iterable[str]) -> list[PartKey]:
    """The partitions that DROP PARTITION LIST names: a period covers all its symbols."""
    if table.layout.period is None:
        raise SqlError(
            f"table '{table.schema.name}' is not partitioned by time; it has no partitions to drop"
        )
    wanted = set(names)
    return [part for part in table.partitions.keys() if part[0] in wanted]
