"""A table's identity index (identity -> (partition, order key)) in forms other than a dict.

`ShardedIndex`: a big table's index as `SHARDS` dicts chosen by the identity's hash. A dict
grows by a resize, one C call over every entry it holds, during which no other thread gets
the interpreter lock: 33 ms at 700,000 entries, measured as the longest wait of `/api/rev`
during a 1,000,000-row import. Sharded, no one dict grows past a 256th of the table, so a
resize stays under a millisecond up to tens of millions of rows. A lookup costs one hash and
one list index more than a dict's (about 0.2 µs). Its shards are shared copy-on-write
(`snapshot`), so that a bulk load can merge its new identities into a copy of the index with
no lock held while writers go on changing the table's own.

`OrderIndex`: the index of a table whose one partition is keyed by identity: that partition
is the index, and it holds no entry of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

from refimpl.engine.storage.blocks import Blocks

Ident = tuple[Any, ...]
Place = tuple[tuple[Any, ...], tuple[Any, ...]]  # (partition key, order key)

SHARDS = 256
_MASK = SHARDS - 1
# Entries from which a table's index is sharded: below it a dict's resize is short (about
# 2 ms at 65,536 entries on a busy machine), and a small table keeps one dict.
SHARD_AT = 65_536


class ShardedIndex:
    """Identity -> place, as a dict reads and writes, in `SHARDS` dicts. Written by the
    table's one writer (or privately, by a load merging into a snapshot)."""

    __slots__ = ("_shards", "_shared")

    def __init__(self, shards: list[dict[Ident, Place]] | None = None) -> None:
        self._shards = shards if shards is not None else [{} for _ in range(SHARDS)]
        # 1 where the shard is shared with a snapshot: copied before its first write.
        self._shared = bytearray(SHARDS)

    @classmethod
    def of(cls, places: Iterable[tuple[Ident, Place]]) -> ShardedIndex:
        """An index of these (identity, place) pairs."""
        made = cls()
        shards = made._shards
        for ident, place in places:
            shards[hash(ident) & _MASK][ident] = place
        return made

    # -- reads ---------------------------------------------------------------------------

    def get(self, ident: Ident, default: Place | None = None) -> Place | None:
        return self._shards[hash(ident) & _MASK].get(ident, default)

    def __contains__(self, ident: object) -> bool:
        try:
            return ident in self._shards[hash(ident) & _MASK]
        except TypeError:  # unhashable: not held, as a dict would say only by raising
            return False

    def __getitem__(self, ident: Ident) -> Place:
        return self._shards[hash(ident) & _MASK][ident]

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def __iter__(self) -> Iterator[Ident]:
        return chain.from_iterable(self._shards)

    def keys(self) -> Iterator[Ident]:
        return iter(self)

    def items(self) -> Iterator[tuple[Ident, Place]]:
        return chain.from_iterable(shard.items() for shard in self._shards)

    def shards(self) -> list[dict[Ident, Place]]:
        """The shards, to be read only (the shard of an identity is at `hash(ident) %
        SHARDS`)."""
        return self._shards

    # -- writes --------------------------------------------------------------------------

    def _own(self, at: int) -> dict[Ident, Place]:
        """Shard `at`, copied first when a snapshot shares it."""
        shard = self._shards[at]
        if self._shared[at]:
            shard = self._shards[at] = dict(shard)
            self._shared[at] = 0
        return shard

    def __setitem__(self, ident: Ident, place: Place) -> None:
        self._own(hash(ident) & _MASK)[ident] = place

    def pop(self, ident: Ident, default: Place | None = None) -> Place | None:
        at = hash(ident) & _MASK
        if ident not in self._shards[at]:
            return default
        return self._own(at).pop(ident)

    def __delitem__(self, ident: Ident) -> None:
        at = hash(ident) & _MASK
        if ident not in self._shards[at]:
            raise KeyError(ident)
        del self._own(at)[ident]

    def update(self, places: Iterable[tuple[Ident, Place]]) -> None:
        """Set each (identity, place) pair: a step per pair, never one C call over all."""
        shards, shared = self._shards, self._shared
        for ident, place in places:
            at = hash(ident) & _MASK
            if shared[at]:
                self._own(at)
            shards[at][ident] = place

    def share(self, shards: Iterable[int]) -> None:
        """Mark these shards (by position) as shared with another index: copied before
        this one's first write to each."""
        for at in shards:
            self._shared[at] = 1

    def let_go(self) -> None:
        """Empty the index a shard at a time (each shard's entries freed in a step of its
        own), so that no one step frees them all: a million entries freed at once took
        14.8 ms of thread CPU in which no other thread got the interpreter lock. For an
        index no one reads any more (a bulk load's once installed)."""
        shards = self._shards
        for at in range(len(shards)):
            shards[at] = {}
        self._shared[:] = bytes(SHARDS)

    def snapshot(self) -> ShardedIndex:
        """A twin sharing every shard, in O(`SHARDS`): either side copies a shard before
        writing to it, so the twin keeps what this index holds now."""
        twin = ShardedIndex(list(self._shards))
        twin._shared[:] = self._shared[:] = b"\x01" * SHARDS
        return twin


def sharded(index: dict[Ident, Place]) -> ShardedIndex:
    """A dict's entries as a `ShardedIndex` (a step per entry: the dict is short)."""
    return ShardedIndex.of(index.items())


class OrderIndex:
    """The identity index of a table whose rows sit in partition `()` ordered by identity
    alone, where a row's place is always `((), identity)`: answered from that partition, so
    it holds no entry of its own. It reads as a dict of identity -> place; setting a place
    records nothing and `pop` removes nothing (the table moves the row itself)."""

    __slots__ = ("_table",)

    def __init__(self, table: Any) -> None:
        self._table = table  # a `Table`: its `partitions` are read at each call

    def _held(self) -> Blocks:
        held: Blocks = self._table.partitions.get((), _EMPTY)
        return held

    def get(self, ident: Ident, default: Place | None = None) -> Place | None:
        return ((), ident) if ident in self else default

    def __contains__(self, ident: object) -> bool:
        try:
            return ident in self._held()
        except TypeError:  # not comparable with the keys (NULL, another type): not held,
            return False  # as a dict's lookup would say

    def __getitem__(self, ident: Ident) -> Place:
        if ident in self:
            return (), ident
        raise KeyError(ident)

    def __len__(self) -> int:
        return len(self._held())

    def __iter__(self) -> Iterator[Ident]:
        return iter(self._held())

    def keys(self) -> Iterator[Ident]:
        return iter(self._held())

    def items(self) -> Iterator[tuple[Ident, Place]]:
        return ((ident, ((), ident)) for ident in self._held())

    def __setitem__(self, ident: Ident, place: Place) -> None:
        pass  # the row's place in the partition is its entry

    def pop(self, ident: Ident, default: Place | None = None) -> Place | None:
        return self.get(ident, default)

    def __delitem__(self, ident: Ident) -> None:
        pass  # as `pop`: the table takes the row out of its partition

    def update(self, places: Iterable[tuple[Ident, Place]]) -> None:
        pass  # as `__setitem__`


_EMPTY = Blocks()  # what an OrderIndex reads while its table holds no row; never written
