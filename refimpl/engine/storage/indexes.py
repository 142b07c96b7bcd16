"""Secondary indexes of a table: (key, identity) entries kept sorted, and UNIQUE checks.

A `SecondaryIndex` belongs to one `Table`, which keeps it current on every change of its
rows (`put`, `delete`, `clear`, partition drops, loads), so every way rows arrive (INSERT,
UPDATE, DELETE, /imp, /write, log replay, a checkpoint's load) maintains it. Indexes are not
written to disk: a table's definition names them and recovery builds them again from the
rows.

A key is the indexed columns' values, each wrapped as `(is_null, value)` so that NULLs sort
after every value and two NULLs never compare their values. An entry is the key followed by
the row's identity, so entries are unique and equal keys sort by identity.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedList

from refimpl.errors import UniqueViolation
from refimpl.sql import ast

Row = tuple[Any, ...]
Ident = tuple[Any, ...]


class _Top:
    """Greater than any key part: the end of a range of keys sharing a prefix."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True


_TOP = _Top()
_NULL = (True, None)
_BEFORE_NULL = (True,)  # after every value, before NULL


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of a range on an index column: the value and whether it is included."""

    value: Any
    inclusive: bool


class SecondaryIndex:
    """The entries of one index over a table's rows."""

    __slots__ = ("definition", "positions", "entries")

    def __init__(self, definition: ast.IndexDef, positions: tuple[int, ...]) -> None:
        self.definition = definition
        self.positions = positions
        self.entries: SortedList = SortedList()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def unique(self) -> bool:
        return self.definition.unique

    def _entry(self, row: Row, ident: Ident) -> tuple[Any, ...]:
        return (*((v is None, v) for v in (row[p] for p in self.positions)), *ident)

    def key_values(self, row: Row) -> tuple[Any, ...] | None:
        """The row's values of the indexed columns; None when one is NULL (never a clash)."""
        key = tuple(row[p] for p in self.positions)
        return None if any(v is None for v in key) else key

    # -- changes (the table's one writer) --------------------------------------------------

    def add(self, row: Row, ident: Ident) -> None:
        self.entries.add(self._entry(row, ident))

    def remove(self, row: Row, ident: Ident) -> None:
        self.entries.discard(self._entry(row, ident))

    def build(self, pairs: Iterable[tuple[Ident, Row]]) -> None:
        """Fill from (identity, row) pairs at once (a load), sorting once."""
        self.entries = SortedList([self._entry(row, ident) for ident, row in pairs])

    def clear(self) -> None:
        self.entries = SortedList()

    def copy(self) -> SecondaryIndex:
        twin = SecondaryIndex(self.definition, self.positions)
        twin.entries = SortedList(self.entries)
        return twin

    # -- reads -----------------------------------------------------------------------------

    def search(
        self, prefix: tuple[Any, ...], low: Bound | None = None, high: Bound | None = None
    ) -> Iterator[Ident]:
        """Identities of rows whose first columns equal `prefix` (no NULLs in it) and whose
        next column lies within the bounds (non-NULL), in key order."""
        wrapped = tuple((False, v) for v in prefix)
        width = len(self.positions)
        if low is None and high is None:
            start: tuple[Any, ...] = wrapped
            stop: tuple[Any, ...] = (*wrapped, _TOP)
            entries = self.entries.irange(start, stop)
        else:
            start = (*wrapped, (False, low.value)) if low is not None else (*wrapped,)
            if low is not None and not low.inclusive:
                start = (*start, _TOP)
            if high is None:
                stop, closed = (*wrapped, _BEFORE_NULL), False
            else:
                stop = (*wrapped, (False, high.value))
                closed = True
                if high.inclusive:
                    stop = (*stop, _TOP)
                else:
                    closed = False
            entries = self.entries.irange(start, stop, inclusive=(True, closed))
        for entry in entries:
            yield entry[width:]

    def holders(self, key: tuple[Any, ...]) -> Iterator[Ident]:
        """Identities of the rows holding exactly this key (no NULL in it)."""
        return self.search(key)

    def first_duplicate(self) -> tuple[Any, ...] | None:
        """The first key (no NULL in it) that two rows hold, or None (a UNIQUE index's
        check when it is made over rows already there)."""
        width = len(self.positions)
        previous = None
        for entry in self.entries:
            key = entry[:width]
            if key == previous and all(not null for null, _ in key):
                return tuple(value for _, value in key)
            previous = key
        return None

    def __len__(self) -> int:
        return len(self.entries)


def build_indexes(
    definitions: Iterable[ast.IndexDef], positions: Mapping[str, int]
) -> dict[str, SecondaryIndex]:
    """Empty indexes for a schema's definitions: lower-case name -> index."""
    return {
        d.name.lower(): SecondaryIndex(d, tuple(positions[c.lower()] for c in d.columns))
        for d in definitions
    }


class PendingKeys:
    """The UNIQUE keys of one transaction's pending rows of a table, per index.

    Entries may go stale (a pending row changed again, or deleted): a clash is only one when
    the pending row still holds the key.
    """

    __slots__ = ("by_index",)

    def __init__(self) -> None:
        self.by_index: dict[str, dict[tuple[Any, ...], Ident]] = {}

    def clear(self) -> None:
        self.by_index.clear()

    def check(
        self,
        table_name: str,
        indexes: Iterable[SecondaryIndex],
        pending: Mapping[Ident, Row | None],
        changes: Mapping[Ident, Row | None],
    ) -> None:
        """UniqueViolation when applying `changes` over `pending` and the indexed rows would
        give two rows one key of a UNIQUE index; else the changes' keys are remembered."""
        checked = [index for index in indexes if index.unique]
        for index in checked:
            keys = self.by_index.setdefault(index.name, {})
            seen: dict[tuple[Any, ...], Ident] = {}
            for ident, row in changes.items():
                if row is None or (key := index.key_values(row)) is None:
                    continue
                if seen.setdefault(key, ident) != ident:
                    raise UniqueViolation(table_name, _label(index), key)
                earlier = keys.get(key)
                if earlier is not None and earlier != ident and earlier not in changes:
                    if _holds(index, pending.get(earlier), key):
                        raise UniqueViolation(table_name, _label(index), key)
                for holder in index.holders(key):
                    if holder == ident or holder in changes:
                        continue
                    if holder in pending and not _holds(index, pending[holder], key):
                        continue
                    raise UniqueViolation(table_name, _label(index), key)
        for index in checked:
            keys = self.by_index[index.name]
            for ident, row in changes.items():
                if row is not None and (key := index.key_values(row)) is not None:
                    keys[key] = ident


def _label(index: SecondaryIndex) -> str:
    """How an error names the index: a constraint by its text, an index by its name."""
    name = index.name
    return name if name.startswith("UNIQUE (") else f"index '{name}'"


def _holds(index: SecondaryIndex, row: Row | None, key: tuple[Any, ...]) -> bool:
    return row is not None and index.key_values(row) == key
