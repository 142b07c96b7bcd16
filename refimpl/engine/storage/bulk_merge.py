"""A prepared bulk load merged into its table with no lock held, installed in a short step.

A load into a table that already has rows must merge its rows into the partitions they fall
in and its identities into the table's index: 2.9 s for 1,000,000 rows among as many, which
other writers waited for while the load held the write and state locks. Here the merge is
made on a snapshot of the table instead:

1. `Merge.begin`, under the write lock: a copy of each partition the load touches (its
   blocks shared copy-on-write, in O(blocks)), a snapshot of the index (`ShardedIndex`
   shards shared the same way; a small dict index copied), and a `Journal` on the table, in
   which every write from then on records the identities it changes.
2. `Merge.build`, with no lock: each touched partition merged a block at a time
   (`Blocks.merged`), the index merged a shard at a time; a key of the load that the
   snapshot holds is found on the way (the merge is then refused).
3. `Merge.install`, under the write and state locks: what the journal names is done again
   on the merged structures (each identity's row and place as the table holds them now:
   the snapshot's place left, the live one taken), and the merged partitions and index
   replace the table's. O(partitions touched + identities written meanwhile).

So the table ends up as if the load's rows had been inserted after every commit that came
before the install. A write the journal cannot replay (a partition dropped, the table
emptied, another load installed) marks it stale: the merge is made again from a new
snapshot, `TRIES` times at most; then, and on a key held, the load is refused (None) and
the caller inserts the rows the ordinary way, which reports any error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refimpl.engine.storage.blocks import Blocks
from refimpl.engine.storage.bulk import PreparedLoad, let_go, still_fits
from refimpl.engine.storage.ident_index import SHARD_AT, OrderIndex, ShardedIndex, sharded
from refimpl.engine.storage.table import Ident, Journal, OrderKey, PartKey, Table

TRIES = 3
Places = dict[Ident, tuple[PartKey, OrderKey]]


class Merge:
    """One attempt at merging a prepared load into its table (see the module docstring)."""

    __slots__ = ("load", "table", "journal", "held", "index", "parts", "merged_index")

    def __init__(self, load: PreparedLoad) -> None:
        """Begin: the caller holds the write lock."""
        table = load.table
        self.load = load
        self.table = table
        self.journal = Journal()
        table.journals.append(self.journal)
        self.held: dict[PartKey, Blocks] = {}  # snapshot copies of the partitions touched
        for part in load.partitions:
            partition = table.partitions.get(part)
            if partition:
                self.held[part] = partition.copy()
        index = table.index
        self.index: Places | ShardedIndex | None  # the snapshot's; None: an OrderIndex
        if isinstance(index, OrderIndex):
            self.index = None
        elif isinstance(index, ShardedIndex):
            self.index = index.snapshot()
        else:
            self.index = dict(index)  # under SHARD_AT entries: a short copy
        self.parts: dict[PartKey, Blocks] = {}
        self.merged_index: Places | ShardedIndex | None = None

    def build(self) -> bool:
        """Merge with no lock held; False when the table held a key of the load."""
        load = self.load
        for part, (prepared, rows) in load.partitions.items():
            partition = self.held.get(part)
            if partition is None:
                self.parts[part] = prepared
                continue
            keys = prepared.keys()[:]
            if rows is None:  # the load's blocks hold their own rows: given in key order
                in_order = list(prepared.values())
                merged = partition.merged(keys, in_order)
                let_go(in_order)
            else:
                merged = partition.merged(keys, rows)
            let_go(keys)  # a slice at a time: no merged block holds these lists
            if merged is None:
                return False
            self.parts[part] = merged
        if self.index is not None:
            self.merged_index = merged_index(self.index, load.index)
            if self.merged_index is None:
                return False
        return True

    def fits(self, tables: dict[str, Table]) -> bool | None:
        """Under the write lock, before `install`: True when it may install; None when the
        table changed in a way the journal cannot replay (another attempt may fit); False
        when the load cannot go this way (its table replaced, or a key of the load written
        to the table meanwhile)."""
        if not still_fits(self.load, tables):
            return False
        if self.journal.stale:
            return None
        if self.table.keyed:
            live, new = self.table.index, self.load.index
            if any(ident in new and ident in live for ident in set(self.journal)):
                return False
        return True

    def install(self) -> None:
        """Replace the table's merged partitions and index, the journal's writes done
        again on them; the caller holds the write and state locks and `fits` said True."""
        table = self.table
        self.end()
        parts, index = self.parts, self.merged_index
        live, loaded = table.index, self.load.index
        for ident in set(self.journal):
            if ident in loaded:
                # A key of the load a writer took and let go meanwhile (`fits`: not held
                # now): the load's row and place stand, as if written after that delete.
                continue
            old = self._snapshot_place(ident)
            new = live.get(ident)
            if old is not None and old[0] in parts:
                parts[old[0]].pop(old[1])
            if new is not None and new[0] in parts:
                parts[new[0]][new[1]] = table.partitions[new[0]][new[1]]
            if index is not None:
                if new is None:
                    index.pop(ident, None)
                else:
                    index[ident] = new
        for part, partition in parts.items():
            table.partitions[part] = partition
        if index is not None:
            table.index = index
        for journal in table.journals:  # other loads' snapshots no longer hold
            journal.stale = True

    def end(self) -> None:
        """Take the journal off the table (the caller holds the write lock); again: no-op."""
        if self.journal in self.table.journals:
            self.table.journals.remove(self.journal)

    def let_go(self) -> None:
        """Let go of the snapshot (its index a shard at a time, its copies of the touched
        partitions a block at a time) once this attempt is over (installed or not) and no
        lock is held; nothing may be read of it after.

        It shares the shards and blocks the table had at `begin`, and an install replaces
        those it merged into by new ones: the snapshot then holds the last reference to
        each. Let go at once, those of a table of a million rows were one step of 27 to 44
        ms (thread CPU) at `merge_in`'s return, in which no other thread gets the
        interpreter lock."""
        if isinstance(self.index, ShardedIndex):
            self.index.let_go()
        for partition in self.held.values():  # copies: blocks the merge remade die with them
            partition.let_go()

    def _snapshot_place(self, ident: Ident) -> tuple[PartKey, OrderKey] | None:
        """Where the snapshot held `ident` (None: nowhere)."""
        if self.index is not None:
            return self.index.get(ident)
        held = self.held.get(())
        return ((), ident) if held is not None and ident in held else None


def merged_index(
    held: Places | ShardedIndex, new: Places | ShardedIndex
) -> Places | ShardedIndex | None:
    """An index of both sides' entries, neither changed; None when a key is on both. Big
    ones are merged a shard at a time (a copy and an update of a few thousand entries each),
    a shard that one side lacks taken from the other as it is (shared: copied before the
    merged index's first write to it)."""
    total = len(held) + len(new)
    if total < SHARD_AT and isinstance(held, dict) and isinstance(new, dict):
        small, big = (held, new) if len(held) < len(new) else (new, held)
        both = dict(big)
        both.update(small)
        return both if len(both) == total else None
    ours = held if isinstance(held, ShardedIndex) else sharded(held)
    theirs = new if isinstance(new, ShardedIndex) else sharded(new)
    shards: list[dict[Ident, Any]] = []
    shared: list[int] = []
    for at, (mine, added) in enumerate(zip(ours.shards(), theirs.shards(), strict=True)):
        if not added or not mine:  # one side only: shared as it is, copied at a write
            shards.append(mine or added)
            shared.append(at)
            continue
        small, big = (mine, added) if len(mine) < len(added) else (added, mine)
        both = dict(big)
        both.update(small)
        if len(both) != len(mine) + len(added):
            return None
        shards.append(both)
    made = ShardedIndex(shards)
    made.share(shared)
    return made


def merge_in(
    load: PreparedLoad,
    tables: dict[str, Table],
    acquire: Callable[[], None],
    release: Callable[[], None],
    commit: Callable[[Merge], int],
) -> int | None:
    """Merge `load` into its table and commit it: `commit(merge)` (the caller's, under the
    write lock `acquire` takes: it logs the load and calls `merge.install` under the state
    lock) gives the LSN returned. None when the load cannot go this way: nothing changed."""
    for _ in range(TRIES):
        acquire()
        try:
            if not still_fits(load, tables):
                return None
            merge = Merge(load)
        finally:
            release()
        built = merge.build()  # no lock held: the table's other writers go on meanwhile
        acquire()
        try:
            fits = merge.fits(tables) if built else False
            if fits:
                return commit(merge)
        finally:
            merge.end()
            release()
            merge.let_go()
        if fits is False:
            return None
    return None
