"""The last transactions of a database, read from its log and made into events once for
every event stream that follows it (`RecentTransactions`, what `event_cursor.EventCursor`
reads as its `Transactions`).

What a caller may rely on: `after(lsn)` gives the log's transactions after `lsn` up to the
durable LSN, each once, in order, as `stream_transactions.transaction_events` makes them,
whichever readers read where; `shared` gives what was made for a key at the durable LSN now.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, TypeVar, cast

from refimpl.engine.features.event_cursor import NO_LINKS, EventShape, Links, StreamTransaction
from refimpl.engine.features.stream_transactions import transaction_events
from refimpl.engine.storage.schema import TableSchema

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

RECENT_TRANSACTIONS = 4096  # transactions kept decoded per database, for streams at the end
RECENT_BYTES = 8 * 1024 * 1024  # and at most about this much of their encoded events
# Read into the kept transactions at a time, as a reader at their end reads on: a group of
# streams far behind takes about 1,100 one-row commits a part (stream_buffer_kb 256).
EXTEND_STEP = 256
T = TypeVar("T")  # what a shared piece of work makes (`RecentTransactions.shared`)


class RecentTransactions:
    """The last transactions of one database, decoded and encoded once for every stream.

    A stream at the end of the log reads here; one further behind reads the log itself
    (what it reads then is not kept: a slow reader costs no shared memory).
    """

    def __init__(
        self,
        database: Database,
        name: str,
        keep: int = RECENT_TRANSACTIONS,
        keep_bytes: int = RECENT_BYTES,
        links: Links = NO_LINKS,
    ) -> None:
        self._database = database
        self._name = name
        self._links = links
        self._shapes: dict[str, EventShape] = {}  # by table key, see `transaction_events`
        self._keep = keep
        self._keep_bytes = keep_bytes
        self._lock = threading.Lock()
        self._recent: list[StreamTransaction] = []  # consecutive LSNs
        self._bytes = 0
        # What streams took at the durable LSN `_shared_at`, by position and view: made once
        # for all of them (spec/stream.md: a thousand streams, one read and one encoding).
        # The pair is replaced whole (under the lock) at a new durable LSN, so that a stream
        # finds what others made with one read and no lock: a thousand of them at each commit.
        self._shared_lock = threading.Lock()
        self._shared: tuple[int, dict[Hashable, object]] = (-1, {})

    @property
    def durable_lsn(self) -> int:
        return self._database.log.durable_lsn

    def shared(self, key: Hashable, make: Callable[..., T], *args: object) -> T:
        """What `make(*args)` gives for `key`, made once for every asker while the durable LSN
        stands still (a new durable LSN forgets them all, so this holds one commit's worth).

        `make` must give the same for any asker of `key` at that LSN; two askers at once may
        both make it, and the first one made is kept."""
        durable = self._database.log.durable_lsn
        at, made = self._shared
        found = made.get(key) if at == durable else None
        if found is not None:
            return cast(T, found)  # what `make` gave for this key, by the rule above
        mine = make(*args)
        with self._shared_lock:
            at, made = self._shared
            if at > durable:
                return mine  # made at an older LSN than the kept ones: shared with nobody
            if at < durable:
                made = {}
                self._shared = (durable, made)
            return cast(T, made.setdefault(key, mine))

    def after(self, after_lsn: int) -> Iterator[StreamTransaction]:
        """The transactions after `after_lsn` up to the durable LSN, in order, read as they
        are iterated; Gone from the iterator when the log no longer holds them.

        Kept ones come from memory. Past the kept ones, a reader near the end of the log
        extends them EXTEND_STEP transactions at a time as it reads on: one that stops (at
        its budget) has had only about what it read read and encoded, not every commit
        since. A reader behind the kept ones, or far from the end, reads the log itself
        (what it reads then is not kept: a slow reader costs no shared memory)."""
        durable = self._database.log.durable_lsn
        if after_lsn >= durable:
            return iter(())
        with self._lock:
            kept = self._kept_after(after_lsn, durable)
        if kept is None:
            return self._from_log(after_lsn)
        if not kept or kept[-1].lsn >= durable:
            return iter(kept)  # most takes: one look at the kept ones
        return self._kept_then_on(kept)

    def _kept_then_on(self, kept: list[StreamTransaction]) -> Iterator[StreamTransaction]:
        """`kept`, then what follows them up to the durable LSN, a step at a time."""
        log = self._database.log
        while True:
            yield from kept
            at, durable = kept[-1].lsn, log.durable_lsn
            if at >= durable:
                return
            with self._lock:
                found = self._kept_after(at, durable)
            if found is None:
                yield from self._from_log(at)
                return
            if not found:
                return
            kept = found

    def _kept_after(self, at: int, durable: int) -> list[StreamTransaction] | None:
        """Kept transactions after `at` (`at` < `durable`), extended from the log when `at` is
        their end; None: read the log instead (the caller holds the lock)."""
        recent = self._recent
        if not recent or at > recent[-1].lsn:  # past the kept ones: near the end, keep anew
            if durable - at > self._keep:
                return None
            recent.clear()
            self._bytes = 0
            self._extend(at)
        elif at == recent[-1].lsn:
            self._extend(at)
        if not recent or recent[0].lsn > at + 1:
            return None  # behind the kept ones (or trimmed past `at` by the extension)
        return recent[at + 1 - recent[0].lsn :]

    def _extend(self, after_lsn: int) -> None:
        """Read the next EXTEND_STEP transactions after `after_lsn`, the end of the kept ones,
        into them (the caller holds the lock)."""
        recent = self._recent
        # islice, not the log's limit_records: a C loop, where the log's counts each record.
        for txn in islice(self._from_log(after_lsn), EXTEND_STEP):
            recent.append(txn)
            self._bytes += txn.size
        # Trimmed in steps, so that the list is copied once per many commits, not at each.
        if len(recent) > 2 * self._keep or self._bytes > self._keep_bytes:
            drop = max(len(recent) - self._keep, 0)
            kept_bytes = self._bytes - sum(t.size for t in recent[:drop])
            while kept_bytes > self._keep_bytes // 2 and drop < len(recent) - 1:
                kept_bytes -= recent[drop].size
                drop += 1
            del recent[:drop]
            self._bytes = kept_bytes

    def _from_log(self, after_lsn: int) -> Iterator[StreamTransaction]:
        database = self._database
        for lsn, payload in database.log.read(after_lsn):
            yield transaction_events(
                self._name, lsn, payload, self._schema_of, self._links, self._shapes
            )

    def _schema_of(self, key: str) -> TableSchema | None:
        stored = self._database.tables.get(key)  # one dict read: atomic
        return None if stored is None else stored.schema
