"""A partition's rows in bounded blocks shared copy-on-write, so a scan holds no lock.

A `Blocks` maps order keys to rows, sorted, as the `SortedDict` it replaces did, with the
same reading methods. Its rows sit in blocks of at most `BLOCK_ROWS` keys: a sorted list of
keys and a dict of their rows each. A scan (`Blocks.detached`) takes the list of its blocks
in O(blocks) while the caller holds the database's state lock, and reads them after the
lock is let go: the blocks it took are frozen (the partition moves to a new epoch), and a
writer copies a frozen block before its first write to it. So a reader's long work never
holds the state lock that commits need (the rule of `refimpl.waiting`), and a commit pays
at most one copy of a block of `BLOCK_ROWS` rows per block it writes after a scan.

Why blocks, measured (300,000 rows of `(id INT PRIMARY KEY, v INT, name STRING)`): listing
them under the lock took 120 ms on a quiet machine, 730 ms at a load average of 14; every
commit, and every reader queued behind a commit, waited for it. Sharing whole partitions
copy-on-write instead would move that wait to the writer: its first write after a scan
copies the partition, 390 ms for that table at the same load. A block's copy is a slice of
its keys and a dict of `BLOCK_ROWS` rows, some microseconds.

A block made from a bigger dict (`from_sorted`, a loaded or merged partition's) borrows
that dict, shared with its neighbours, so that taking over a bulk load's sorted rows costs
O(blocks), not a step per row. A borrowed block is never written: its first write copies
it, as a frozen one's does. Its dict holds other blocks' keys too, and keys they have
since deleted; a lookup finds the block by its range (the keys above the previous block's
last), and in that range the borrowed dict holds exactly the block's own keys as long as
the range never grows, so a block whose range is about to grow (the previous block
shrinks or goes) is copied first.

A partition loaded from a checkpoint (`from_encoded`) holds its blocks still encoded, as
the checkpoint stored them (with their key count and last key): opening makes no object
per row. A block is decoded when something first reads its keys or rows (a scan, a point
read, a write into it), one block at a time: 0.3 to 0.37 ms for its 1,024 rows (three
columns, at a load average of 11 to 15), so a reader or writer under the state or write
lock decodes at most the blocks it touches, never the table. A scan that takes encoded
blocks decodes them after the lock, as it reads them.
Decoding gives the same keys and rows whoever does it, so two readers decoding one block
at once are harmless.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, count
from operator import itemgetter
from typing import Any, overload

from sortedcontainers import SortedDict

Row = tuple[Any, ...]
OrderKey = tuple[Any, ...]

# Keys a block holds at most: a write's copy of a frozen block costs a slice and a dict of
# this many. A block over it splits in two halves; one under a quarter of it joins its next
# neighbour when both fit in one.
BLOCK_ROWS = 2048
_HALF = BLOCK_ROWS // 2
_SMALL = BLOCK_ROWS // 4
# The epoch of a block whose dict is borrowed: no partition is ever at it.
_BORROWED = 0
_epochs = count(_BORROWED + 1)


class _Block:
    """Sorted keys and their rows. Written in place only by its partition's writer while
    `epoch` is the partition's own (no scan has taken it since it was made)."""

    __slots__ = ("keys", "rows", "epoch")

    def __init__(self, keys: list[OrderKey], rows: dict[OrderKey, Row], epoch: int) -> None:
        self.keys = keys
        self.rows = rows
        self.epoch = epoch

    def values(self) -> Iterator[Row]:
        return map(self.rows.__getitem__, self.keys)

    @property
    def encoded(self) -> bool:
        """Whether its keys and rows are still to decode (only an `_EncodedBlock`'s are)."""
        return False


# How an encoded block's payload becomes its keys (sorted) and its dict of rows.
Opener = Callable[[Any], tuple[list[OrderKey], dict[OrderKey, Row]]]


class _EncodedBlock(_Block):
    """A block whose keys and rows are still encoded: `keys` and `rows` are decoded at the
    first read of either (`__getattr__` runs only while they are unset). `text` is what its
    rows' text values count (`Blocks.text_length`) while it is encoded."""

    __slots__ = ("_payload", "_open", "text")

    def __init__(self, payload: Any, opener: Opener, text: int, epoch: int) -> None:
        self._payload = payload
        self._open = opener
        self.text = text
        self.epoch = epoch

    def __getattr__(self, name: str) -> Any:
        payload = self._payload
        if payload is None:  # another thread decoded it meanwhile: keys and rows are set
            return object.__getattribute__(self, name)
        if name not in ("keys", "rows"):
            raise AttributeError(name)
        keys, rows = self._open(payload)
        self.rows = rows
        self.keys = keys
        self._payload = None  # after keys and rows: a thread seeing None finds them set
        return keys if name == "keys" else rows

    @property
    def encoded(self) -> bool:
        return self._payload is not None


class Blocks:
    """Order key -> row, sorted: a partition of a table. Written by the database's one
    writer; read under the state lock, except what `detached` gives, which is read after.
    """

    __slots__ = ("_blocks", "_maxes", "_len", "_epoch")

    def __init__(self) -> None:
        self._blocks: list[_Block] = []
        self._maxes: list[OrderKey] = []  # the last key of each block
        self._len = 0
        self._epoch = next(_epochs)

    @classmethod
    def from_sorted(cls, keys: list[OrderKey], rows: dict[OrderKey, Row]) -> Blocks:
        """Blocks of `keys`, sorted, which are exactly the keys of `rows` (a key of `rows`
        not in `keys` would be found by a lookup). Both are taken over: the caller changes
        neither afterwards."""
        made = cls()
        for start in range(0, len(keys), _HALF):
            some = keys[start : start + _HALF]
            made._blocks.append(_Block(some, rows, _BORROWED))
            made._maxes.append(some[-1])
        made._len = len(keys)
        return made

    @classmethod
    def from_rows(cls, keys: list[OrderKey], rows: Sequence[Row], first: int = 0) -> Blocks:
        """Blocks of `keys[first:]` (sorted and distinct), `rows[i]` the row of `keys[i]`:
        each block with a dict of its own rows, made a block at a time. So no C call goes
        over them all, as the dict that `from_sorted`'s blocks borrow is made (a dict of a
        million rows grows by resizes of up to 120 ms, thread CPU, a busy machine, during
        which no other thread of the server runs), nor copies them (`keys[first:]`)."""
        made = cls()
        for start in range(first, len(keys), _HALF):
            some = keys[start : start + _HALF]
            own = dict(zip(some, rows[start : start + _HALF], strict=True))
            made._blocks.append(_Block(some, own, made._epoch))
            made._maxes.append(some[-1])
        made._len = max(len(keys) - first, 0)
        return made

    @classmethod
    def from_encoded(
        cls, parts: Sequence[tuple[OrderKey, int, int, Any]], opener: Opener
    ) -> Blocks:
        """Blocks still encoded: for each, in key order, its last key, its number of keys,
        what its text values count and its payload, which `opener` decodes when the block
        is first read. The last keys must rise strictly."""
        made = cls()
        for last, size, text, payload in parts:
            made._blocks.append(_EncodedBlock(payload, opener, text, made._epoch))
            made._maxes.append(last)
            made._len += size
        return made

    @classmethod
    def from_dict(cls, rows: dict[OrderKey, Row]) -> Blocks:
        """Blocks of these rows (the dict is taken over)."""
        return cls.from_sorted(sorted(rows), rows)

    # -- reads (under the state lock) ------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def last_key(self) -> OrderKey | None:
        """The greatest key (None when there is none), without decoding a block."""
        return self._maxes[-1] if self._maxes else None

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple):
            return False
        at = bisect_left(self._maxes, key)
        return at < len(self._maxes) and key in self._blocks[at].rows

    def __getitem__(self, key: OrderKey) -> Row:
        at = bisect_left(self._maxes, key)
        if at < len(self._maxes):
            return self._blocks[at].rows[key]
        raise KeyError(key)

    def get(self, key: OrderKey, default: Row | None = None) -> Row | None:
        return self[key] if key in self else default

    def __iter__(self) -> Iterator[OrderKey]:
        return chain.from_iterable([block.keys for block in self._blocks])

    def keys(self) -> _Keys:
        """The keys in order; indexable by position and slice, as a SortedDict's."""
        return _Keys(self)

    def values(self) -> Iterator[Row]:
        return chain.from_iterable(map(_Block.values, self._blocks))

    def items(self) -> Iterator[tuple[OrderKey, Row]]:
        return zip(self, self.values(), strict=True)

    def irange(
        self,
        minimum: OrderKey | None = None,
        maximum: OrderKey | None = None,
        inclusive: tuple[bool, bool] = (True, True),
    ) -> Iterator[OrderKey]:
        """The keys from `minimum` to `maximum` (None: no bound), as SortedDict.irange."""
        maxes = self._maxes
        first = 0 if minimum is None else bisect_left(maxes, minimum)
        last = len(maxes) if maximum is None else min(len(maxes), bisect_left(maxes, maximum) + 1)
        keys = list(chain.from_iterable([block.keys for block in self._blocks[first:last]]))
        start = 0
        if minimum is not None:
            start = (bisect_left if inclusive[0] else bisect_right)(keys, minimum)
        end = len(keys)
        if maximum is not None:
            end = (bisect_right if inclusive[1] else bisect_left)(keys, maximum)
        return iter(keys[start:end])

    def rows_for(self, keys: Sequence[OrderKey]) -> list[Row]:
        """The rows of `keys` (sorted, each one held), by C-level lookups a block at a time,
        not a call of `self[key]` each: for listing many rows under the state lock."""
        rows: list[Row] = []
        maxes, blocks = self._maxes, self._blocks
        at = 0
        while at < len(keys):
            block = bisect_left(maxes, keys[at])
            end = bisect_right(keys, maxes[block], at)
            rows += map(blocks[block].rows.__getitem__, keys[at:end])
            at = end
        return rows

    def bisect_right(self, key: OrderKey) -> int:
        """The position after every key <= `key`."""
        at = bisect_right(self._maxes, key)
        before = sum(len(block.keys) for block in self._blocks[:at])
        if at == len(self._blocks):
            return before
        return before + bisect_right(self._blocks[at].keys, key)

    def detached(self, low: OrderKey | None = None, high: OrderKey | None = None) -> Iterator[Row]:
        """The rows of keys in [`low`, `high`) (None: no bound), in order, as they are now.

        Taken in O(blocks) under the caller's state lock; the iterator may be read after
        the lock is let go, and no write made afterwards changes what it gives."""
        maxes = self._maxes
        start = 0 if low is None else bisect_left(maxes, low)
        end = len(maxes) if high is None else min(len(maxes), bisect_left(maxes, high) + 1)
        taken = self._blocks[start:end]
        if taken:
            self._epoch = next(_epochs)  # every block taken is frozen: a write copies it
        return _rows_between(taken, low, high)

    def detached_items(self) -> Iterator[tuple[OrderKey, Row]]:
        """Every (key, row) pair, in order, as they are now: taken as `detached` is."""
        taken = self._blocks[:]
        if taken:
            self._epoch = next(_epochs)  # every block taken is frozen: a write copies it
        return chain.from_iterable(zip(block.keys, block.values(), strict=True) for block in taken)

    def detached_parts(self) -> Iterator[tuple[Any, list[OrderKey], Iterable[Row]]]:
        """Each block as of now, in order, taken as `detached` is: `(payload, [], ())` for a
        block still encoded (its payload as `from_encoded` had it, not decoded), else
        `(None, its keys, its rows)`."""
        taken = self._blocks[:]
        if taken:
            self._epoch = next(_epochs)  # every block taken is frozen: a write copies it
        return map(_part_of, taken)

    def text_length(self, positions: Sequence[int]) -> int:
        """The characters of the non-empty values at `positions` of every row (what text
        columns count towards the memory limit); an encoded block counts what its checkpoint
        stored, and is not decoded."""
        if not positions:
            return 0
        total = 0
        decoded: list[_Block] = []
        for block in self._blocks:
            if isinstance(block, _EncodedBlock) and block.encoded:
                total += block.text
            else:
                decoded.append(block)
        # Each dict's values where the blocks sharing it hold all of its keys: no lookup per
        # row (the count of a million rows as a replay leaves them: 54 to 62 ms of CPU,
        # against 73 to 94 ms listed by their keys, at a load average of 11 to 15).
        rows = list(chain.from_iterable(map(_rows_of, _dicts_of(decoded))))
        for position in positions:
            total += sum(map(len, filter(None, map(itemgetter(position), rows))))
        return total

    # -- writes (the one writer only) ------------------------------------------------------

    def __setitem__(self, key: OrderKey, row: Row) -> None:
        maxes = self._maxes
        if not maxes:
            self._blocks.append(_Block([key], {key: row}, self._epoch))
            maxes.append(key)
            self._len = 1
            return
        if key > maxes[-1]:
            # After every key (ascending times or ids, the common insert): appended to the
            # last block, one comparison where a search and a sorted insert make a dozen.
            at = len(maxes) - 1
            block = self._blocks[at]
            if block.epoch != self._epoch or type(block) is _EncodedBlock:
                block = self._writable(at)  # not this partition's own yet: copied
            block.keys.append(key)
            maxes[at] = key
            self._len += 1
        else:
            at = bisect_left(maxes, key)
            block = self._writable(at)
            if key not in block.rows:
                insort(block.keys, key)  # within the block's range: its last key stays
                self._len += 1
        block.rows[key] = row
        if len(block.keys) > BLOCK_ROWS:
            self._split(at)

    def pop(self, key: OrderKey) -> Row:
        """Remove the row of `key` and give it (KeyError when there is none)."""
        if key not in self:
            raise KeyError(key)
        at = bisect_left(self._maxes, key)
        block = self._writable(at)
        row = block.rows.pop(key)
        keys = block.keys
        del keys[bisect_left(keys, key)]
        self._len -= 1
        if not keys:
            del self._blocks[at]
            del self._maxes[at]
            self._own(at)  # its range now reaches down to the previous block's last key
            return row
        if key > keys[-1]:
            self._maxes[at] = keys[-1]
            self._own(at + 1)
        if len(keys) < _SMALL and at + 1 < len(self._blocks):
            self._join(at)
        return row

    def __delitem__(self, key: OrderKey) -> None:
        self.pop(key)

    def update(self, rows: Mapping[OrderKey, Row]) -> None:
        """Set each of these rows. Rows that all sort after the partition's (a replay's or a
        load's ascending inserts), half a block of them or more, are added as blocks of
        their own without a step per row; other rows, many at once (a quarter of the
        partition or more), come in by one sort and merge; a dict of them (a SortedDict
        too) is then taken over. Fewer go in a key at a time."""
        if not rows:
            return
        if len(rows) * 4 < self._len and (len(rows) < _HALF or min(rows) <= self._maxes[-1]):
            for key in rows.keys():
                self[key] = rows[key]
            return
        if not isinstance(rows, dict):
            rows = dict(zip(rows.keys(), map(rows.__getitem__, rows.keys()), strict=True))
        keys = list(rows) if isinstance(rows, SortedDict) else sorted(rows)
        if not keys:
            return
        if not self._len or keys[0] > self._maxes[-1]:
            made = Blocks.from_sorted(keys, rows)
        else:
            merged: dict[OrderKey, Row] = {}
            for block in self._blocks:
                merged.update(zip(block.keys, block.values(), strict=True))
            merged.update(rows)
            made = Blocks.from_dict(merged)
            self._blocks, self._maxes, self._len = [], [], 0
        self._blocks += made._blocks
        self._maxes += made._maxes
        self._len += made._len

    def merged(
        self, keys: list[OrderKey], rows: dict[OrderKey, Row] | Sequence[Row]
    ) -> Blocks | None:
        """A new partition of this one's rows and the new `rows` of `keys` (sorted and
        distinct), this one unchanged; None when one of `keys` is held here already.
        `rows` is either a dict of exactly those keys or a sequence in their order (`rows[i]`
        the row of `keys[i]`), as a load whose blocks hold their own rows has them: so no
        dict of them all is made, whose growth is one C call over all of them.

        Made a block at a time, never by one C call over the partition: each block whose
        range (above the previous block's last key, up to its own) gets new keys is made
        again from its keys and those (one merge of two sorted runs), every other block is
        shared (both partitions then copy it before writing), and the keys after the last
        block become blocks that borrow the dict `rows` (or, from a sequence, hold dicts of
        their own). So no block's range grows (see the module docstring). Taking 1,000,000
        rows among as many costs a pass over the blocks they fall in, in steps of a few
        thousand rows."""
        made = Blocks()
        self._epoch = next(_epochs)  # blocks shared with `made` are frozen on this side too
        at = 0
        for block, last in zip(self._blocks, self._maxes, strict=True):
            end = bisect_right(keys, last, at)
            if end == at:
                made._blocks.append(block)
                made._maxes.append(last)
                continue
            some = keys[at:end]
            own = block.keys
            joined = dict(zip(own, block.values(), strict=True))
            added = map(rows.__getitem__, some) if isinstance(rows, dict) else rows[at:end]
            joined.update(zip(some, added, strict=True))
            if len(joined) != len(own) + len(some):
                return None
            every = sorted(own + some)  # two sorted runs: one linear merge
            for start in range(0, len(every), _HALF):
                chunk = every[start : start + _HALF]
                made._blocks.append(_Block(chunk, joined, _BORROWED))
                made._maxes.append(chunk[-1])
            at = end
        if isinstance(rows, dict):
            tail = Blocks.from_sorted(keys[at:], rows)
        else:
            tail = Blocks.from_rows(keys, rows, at)
        made._blocks += tail._blocks
        made._maxes += tail._maxes
        made._len = self._len + len(keys)
        return made

    def let_go(self) -> None:
        """Empty this partition a block at a time (each block's rows let go in a step of its
        own, not all in one step: a million rows' blocks freed at once took 16 ms of thread
        CPU in which no other thread got the interpreter lock). Only for a partition no
        table holds and no one reads any more; blocks shared with another partition stay
        there."""
        blocks = self._blocks
        while blocks:
            blocks.pop()
        self._maxes.clear()
        self._len = 0

    def copy(self) -> Blocks:
        """A twin sharing these blocks: either side copies a block before writing it."""
        twin = Blocks()
        twin._blocks = list(self._blocks)
        twin._maxes = list(self._maxes)
        twin._len = self._len
        self._epoch = next(_epochs)
        return twin

    def _writable(self, at: int) -> _Block:
        block = self._blocks[at]
        # A block still encoded (or decoded once) is copied too, never written in place: a
        # point read without the state lock may be decoding it now, and would set its keys
        # and rows back to the checkpoint's after this write.
        if block.epoch != self._epoch or type(block) is _EncodedBlock:
            keys = block.keys[:]
            block = _Block(keys, dict(zip(keys, block.values(), strict=True)), self._epoch)
            self._blocks[at] = block
        return block

    def _own(self, at: int) -> None:
        """Copy block `at` if it is borrowed: its range is to grow below (see the module
        docstring)."""
        if at < len(self._blocks) and self._blocks[at].epoch == _BORROWED:
            self._writable(at)

    def _split(self, at: int) -> None:
        block = self._blocks[at]  # written just now: this partition's own
        right = block.keys[_HALF:]
        del block.keys[_HALF:]
        moved = dict(zip(right, map(block.rows.pop, right), strict=True))
        self._blocks.insert(at + 1, _Block(right, moved, self._epoch))
        self._maxes.insert(at, block.keys[-1])

    def _join(self, at: int) -> None:
        """Join block `at` (this partition's own) and its next neighbour, if both fit."""
        block, after = self._blocks[at], self._blocks[at + 1]
        if len(block.keys) + len(after.keys) > BLOCK_ROWS:
            return
        block.rows.update(zip(after.keys, after.values(), strict=True))
        block.keys += after.keys
        del self._blocks[at + 1]
        del self._maxes[at]


class _Keys:
    """A partition's keys in order, by position: `keys()[i]`, `keys()[i:j]`, `len`."""

    __slots__ = ("_blocks",)

    def __init__(self, blocks: Blocks) -> None:
        self._blocks = blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def __iter__(self) -> Iterator[OrderKey]:
        return iter(self._blocks)

    @overload
    def __getitem__(self, at: int) -> OrderKey: ...

    @overload
    def __getitem__(self, at: slice) -> list[OrderKey]: ...

    def __getitem__(self, at: int | slice) -> OrderKey | list[OrderKey]:
        if isinstance(at, int):
            size = len(self._blocks)
            position = at + size if at < 0 else at
            if not 0 <= position < size:
                raise IndexError(at)
            found = self[position : position + 1]
            return found[0]
        start, stop, step = at.indices(len(self._blocks))
        if step != 1:
            return list(self)[at]
        taken: list[OrderKey] = []
        for block in self._blocks._blocks:
            if start >= stop:
                break
            size = len(block.keys)
            if start < size:
                taken += block.keys[start : min(size, stop)]
            start, stop = max(0, start - size), stop - size
        return taken


def _rows_between(
    taken: list[_Block], low: OrderKey | None, high: OrderKey | None
) -> Iterator[Row]:
    """The rows of frozen blocks with keys in [`low`, `high`)."""
    last = len(taken) - 1
    for number, block in enumerate(taken):
        keys = block.keys
        start = 0 if low is None or number else bisect_left(keys, low)
        end = len(keys) if high is None or number != last else bisect_left(keys, high)
        if start == 0 and end == len(keys):
            yield from block.values()
        else:
            yield from map(block.rows.__getitem__, keys[start:end])


def _part_of(block: _Block) -> tuple[Any, list[OrderKey], Iterable[Row]]:
    payload = block._payload if isinstance(block, _EncodedBlock) else None
    if payload is not None:  # read once: a thread decoding it meanwhile sets it to None
        return payload, [], ()
    return None, block.keys, block.values()


def _dicts_of(blocks: list[_Block]) -> list[tuple[dict[OrderKey, Row], list[_Block]]]:
    """The dicts of these blocks, each with the blocks that hold it (borrowed dicts are
    shared)."""
    shared: dict[int, tuple[dict[OrderKey, Row], list[_Block]]] = {}
    for block in blocks:
        rows = block.rows
        held = shared.get(id(rows))
        if held is None:
            shared[id(rows)] = (rows, [block])
        else:
            held[1].append(block)
    return list(shared.values())


def _rows_of(held: tuple[dict[OrderKey, Row], list[_Block]]) -> Iterable[Row]:
    """The rows of the blocks holding a dict: the dict's values when they hold all of its
    keys (each key is in one block only), else the blocks' rows by their keys. A borrowed
    dict keeps keys its blocks have since lost, so the counts tell the two apart."""
    rows, blocks = held
    if sum(len(block.keys) for block in blocks) == len(rows):
        return rows.values()
    return chain.from_iterable(map(_Block.values, blocks))
