"""The memory limit on table data (`memory_mb`): what a row counts, and the budget that every
database of a data folder draws from.

What is counted, per row kept in a table: its tuple, and each value as `sys.getsizeof`
measures a value of its column's type (an int of that range, a float; a string as the bytes
of an empty one plus one a character; NULL and BOOLEAN as the type's value too, though Python
shares them), plus `ROW_OVERHEAD` bytes for what holds the row in the table (its identity and
order keys, its index entry, the sorted containers' slots) and `INDEX_ENTRY` bytes for each
secondary index. Those two constants are measured: tests/engine/test_memory_limit.py holds
the whole estimate against tracemalloc. Counting by type keeps the per-row work in C (one
`len` a text value), so the count costs a commit little. Not counted: revisions, the result
cache, live queries, the log's buffers, sessions: they have bounds of their own.

The count is kept incrementally: a commit adds the rows it writes and takes off the rows it
replaces or deletes (a schema change counts its table again). `MemoryBudget.reserve` decides
before anything is logged, so a refused commit leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from operator import itemgetter
from sys import getsizeof
from typing import Any, NamedTuple

from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import MemoryFull

ROW_OVERHEAD = 240
INDEX_ENTRY = 120
MB = 1024 * 1024


# What one value of each column type takes (ints by the size of their type's usual values).
_VALUE_BYTES = {
    "INT": getsizeof(2**30),
    "BIGINT": getsizeof(2**60),
    "TIMESTAMP": getsizeof(2**60),
    "DOUBLE": getsizeof(0.5),
    "BOOLEAN": getsizeof(True),
    "STRING": getsizeof(""),
    "SYMBOL": getsizeof(""),
}
_TEXT = frozenset({"STRING", "SYMBOL"})


def rows_bytes(rows: Sequence[tuple[Any, ...]], schema: TableSchema, indexes: int = 0) -> int:
    """The bytes these rows of a table of `schema` with `indexes` secondary indexes count."""
    if not rows:
        return 0
    return _counted(rows, schema, *_shape(schema, indexes))


def row_bytes(row: tuple[Any, ...], schema: TableSchema, indexes: int = 0) -> int:
    """`rows_bytes` of one row (a one-row INSERT's commit): no list and no getter made."""
    kept = _SHAPES.get(id(schema))  # `_shape`, its look-up written out: every such commit
    if kept is None or kept[0] is not schema or kept[1] != indexes:
        kept = _made_shape(schema, indexes)
    _, _, fixed, texts = kept
    if not texts:
        return fixed
    if len(texts) == 1:
        text = row[texts[0]]
        return fixed + len(text) if text else fixed
    return fixed + sum(map(len, filter(None, map(row.__getitem__, texts))))


def _counted(
    rows: Sequence[tuple[Any, ...]], schema: TableSchema, fixed: int, texts: tuple[int, ...]
) -> int:
    """`rows_bytes` of rows of a table whose `_shape` is (`fixed`, `texts`)."""
    if not texts:
        return fixed * len(rows)
    if len(texts) == 1:
        return fixed * len(rows) + sum(map(len, filter(None, map(itemgetter(texts[0]), rows))))
    return fixed * len(rows) + _text_bytes(rows, schema)


# Each schema's (fixed bytes a row, text columns' places), by schema object with its count
# of indexes: a commit of one row counts it without going over the columns again. A schema
# is never changed in place (a change makes a new object), so the one kept is checked by
# identity; the dictionary is emptied when it holds many.
_SHAPES: dict[int, tuple[TableSchema, int, int, tuple[int, ...]]] = {}
_SHAPES_KEPT = 1024


def _shape(schema: TableSchema, indexes: int) -> tuple[int, tuple[int, ...]]:
    kept = _SHAPES.get(id(schema))
    if kept is None or kept[0] is not schema or kept[1] != indexes:
        kept = _made_shape(schema, indexes)
    return kept[2], kept[3]


def _made_shape(schema: TableSchema, indexes: int) -> tuple[TableSchema, int, int, tuple[int, ...]]:
    texts = tuple(n for n, column in enumerate(schema.columns) if column.type in _TEXT)
    if len(_SHAPES) >= _SHAPES_KEPT:
        _SHAPES.clear()
    made = _SHAPES[id(schema)] = (schema, indexes, _row_bytes(schema, indexes), texts)
    return made


def table_bytes(table: Table) -> int:
    """What every row of `table` counts together: at recovery and schema changes. Only a
    table with text columns is scanned, since every other value counts by its type alone
    (and a block still encoded as its checkpoint stored it counts what the checkpoint
    counted, without being decoded)."""
    fixed = _row_bytes(table.schema, len(table.secondary)) * len(table)
    return fixed + table.text_length(text_positions(table.schema)) if fixed else 0


def text_positions(schema: TableSchema) -> tuple[int, ...]:
    """The positions of the columns whose values count a byte a character (STRING, SYMBOL)."""
    return _shape(schema, 0)[1]


def _row_bytes(schema: TableSchema, indexes: int) -> int:
    types = [column.type for column in schema.columns]
    return (
        ROW_OVERHEAD
        + INDEX_ENTRY * indexes
        + getsizeof((None,) * len(types))
        + sum(_VALUE_BYTES.get(kind, _VALUE_BYTES["BIGINT"]) for kind in types)
    )


def _text_bytes(rows: Iterable[tuple[Any, ...]], schema: TableSchema) -> int:
    """One a character of every text value of `rows`, in one pass over them."""
    positions = [n for n, column in enumerate(schema.columns) if column.type in _TEXT]
    if not positions:
        return 0
    if len(positions) == 1:
        return sum(map(len, filter(None, map(itemgetter(positions[0]), rows))))
    pick = itemgetter(*positions)
    return sum(len(value) for values in map(pick, rows) for value in values if value)


class Growth(NamedTuple):
    """What a sealed transaction changes in the count: per table key, its bytes after the
    commit (None for a dropped table), and the sum of the differences (a named tuple: made
    at every commit, where a frozen dataclass's fields cost a Python call each to set)."""

    tables: dict[str, int | None]
    delta: int


def transaction_growth(txn: Transaction, counted: dict[str, int]) -> Growth:
    """The change a sealed transaction makes to the tables' counts (`counted`, per key)."""
    after: dict[str, int | None] = {}
    delta = 0
    for key, work in txn.work.items():
        before = counted.get(key, 0)
        if work.dropped:
            after[key] = None
            delta -= before
            continue
        if work.working is not None:
            now = table_bytes(work.working)  # a new or rebuilt table: counted whole
        elif work.base is not None and work.sealed:
            base = work.base
            schema = base.schema
            fixed, texts = _shape(schema, len(base.secondary))
            sealed = work.sealed
            added = list(filter(None, sealed.values()))  # None: a deleted row
            now = before + _counted(added, schema, fixed, texts) if added else before
            # The rows replaced or deleted count no more: an INSERT's new rows replace none,
            # told by a look-up each, not read in the table's order as `rows_of` reads them.
            if any(map(base.index.get, sealed)):
                now -= _counted(base.rows_of(sealed), schema, fixed, texts)
        else:
            continue
        after[key] = now
        delta += now - before
    return Growth(after, delta)


class MemoryBudget:
    """The limit on table data of every database of one data folder, and their use.

    `limit_bytes` 0 means no limit (the use is still counted). Thread-safe: databases commit
    under their own write locks, so the budget keeps its own. A database's use is kept under
    the name it gives (its `Database.name`, the same string at every call: nothing is case
    folded, which a commit's `reserve` would pay for).
    """

    def __init__(self, limit_bytes: int = 0) -> None:
        self.limit_bytes = limit_bytes
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(self._used.values())

    def used_by(self, database: str) -> int:
        with self._lock:
            return self._used.get(database, 0)

    def set(self, database: str, used: int) -> None:
        """The use of a database counted afresh (after its recovery)."""
        with self._lock:
            self._used[database] = used

    def forget(self, database: str) -> None:
        """A database that was dropped or closed uses nothing any more."""
        with self._lock:
            self._used.pop(database, None)

    def reserve(self, database: str, delta: int) -> None:
        """Count `delta` more bytes for `database`; MemoryFull (nothing counted) when a
        growth would pass the limit. Shrinking is always allowed.

        The caller holds `database`'s write lock: a database's count changes only by its
        own commits, one at a time. So only a growth that meets a limit takes the budget's
        lock (its check and its count are one step against other databases' growths); any
        other reserve changes its database's entry alone without it (every commit counts)."""
        used = self._used
        if delta > 0 and self.limit_bytes:
            with self._lock:
                total = sum(used.values())
                if total + delta > self.limit_bytes:
                    raise MemoryFull(
                        "the memory limit for table data (memory_mb,"
                        f" {_size(self.limit_bytes)}) is reached: {_size(total)} are in use"
                        f" and the write needs {_size(delta)} more; nothing was written;"
                        " delete rows or drop a table, or raise memory_mb and restart"
                    )
                used[database] = used.get(database, 0) + delta
            return
        used[database] = used.get(database, 0) + delta

    def stats(self) -> dict[str, int | None]:
        """`used_bytes` and `limit_bytes` (None without a limit), as /api/stats shows them."""
        return {"used_bytes": self.used_bytes, "limit_bytes": self.limit_bytes or None}


def _size(size: int) -> str:
    if size < 10 * 1024:
        return f"{size} bytes"
    if size < 10 * MB:
        return f"{size / 1024:.0f} KB"
    return f"{size / MB:.0f} MB"
