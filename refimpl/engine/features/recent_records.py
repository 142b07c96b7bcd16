"""A database's log records read ahead of a change stream's small pages, kept for its next.

A reader of small pages (`/api/changes?limit=100`) asks for the records after the last
LSN it read, page after page. Read from the log each time, a page opens a segment file,
skips up to `INDEX_EVERY` frames to its first record and reads a record or two: at pages of
100 rows, more than the page's own rows cost. So a page that read fewer than
`READ_AHEAD_BYTES` of records reads on, while the file is open, to that many, and keeps
those records (their payloads as the log holds them) for the next page, which finds them
here by LSN instead of opening the file again.

What a caller may rely on: `LogRecords` yields exactly what `WriteAheadLog.read(after_lsn)`
yields, in order: only records that were durable when read (a durable record never changes,
so a kept one is never stale), and `Gone` when the log no longer holds the records after
`after_lsn` (checked before any kept record is used, as the log checks it). The records kept
per log are bounded in bytes (`KEPT_BYTES`), the oldest kept dropped first; they go with the
log (a dropped database's, a restored one's: a new log is a new key).

`records_through` is for a reader that follows the log's end (a live query's maintainer):
the records a commit just appended, from memory while the log keeps them there
(`WriteAheadLog.recent`), durable or not yet.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator

from refimpl.engine.storage.wal import WriteAheadLog

READ_AHEAD_BYTES = 64 * 1024  # what the log's read buffer holds: one read from the disk
KEPT_BYTES = 1024 * 1024  # per log: the read-aheads of about 16 readers at once


class _Kept:
    """One log's kept records by LSN, in the order they were kept."""

    __slots__ = ("lock", "payloads", "size")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.payloads: dict[int, bytes] = {}
        self.size = 0

    def keep(self, records: list[tuple[int, bytes]]) -> None:
        with self.lock:
            payloads = self.payloads
            for lsn, payload in records:
                if lsn not in payloads:
                    payloads[lsn] = payload
                    self.size += len(payload)
            while self.size > KEPT_BYTES and payloads:
                oldest = next(iter(payloads))
                self.size -= len(payloads.pop(oldest))


_kept: weakref.WeakKeyDictionary[WriteAheadLog, _Kept] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def _of(log: WriteAheadLog) -> _Kept:
    kept = _kept.get(log)
    if kept is None:
        with _kept_lock:
            kept = _kept.setdefault(log, _Kept())
    return kept


class LogRecords:
    """The records after `after_lsn` as `log.read(after_lsn)` gives them, kept ones first.

    Iterate it once; then `read_ahead()` when the page it read is full (the next page will
    start where it stopped), and `close()` in any case (it closes the log's file)."""

    __slots__ = ("_log", "_after", "_kept", "_reading", "_read_bytes", "_last")

    def __init__(self, log: WriteAheadLog, after_lsn: int) -> None:
        self._log = log
        self._after = after_lsn
        self._kept = _of(log)
        self._reading: Iterator[tuple[int, bytes]] | None = None
        self._read_bytes = 0  # payload bytes this page took from the log's file
        self._last: tuple[int, bytes] | None = None  # the last record taken from the file

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        lsn = self._after
        # From the start (0) the log says where the records begin; and a position the log
        # no longer holds is its Gone, never an answer from what is kept.
        if lsn > 0 and lsn + 1 >= self._log.oldest_lsn:
            payloads = self._kept.payloads
            while (payload := payloads.get(lsn + 1)) is not None:
                lsn += 1
                yield lsn, payload
        self._reading = self._log.read(lsn)
        for record in self._reading:
            self._last = record
            self._read_bytes += len(record[1])
            yield record

    def read_ahead(self) -> None:
        """Read on from the log's open file to `READ_AHEAD_BYTES` for this page, and keep
        what was read past the page (and the page's last record, which a page that stopped
        before it may start with)."""
        reading = self._reading
        if reading is None or self._read_bytes >= READ_AHEAD_BYTES:
            return
        ahead = [self._last] if self._last is not None else []
        size = self._read_bytes
        for record in reading:
            ahead.append(record)
            size += len(record[1])
            if size >= READ_AHEAD_BYTES:
                break
        if ahead:
            self._kept.keep(ahead)

    def close(self) -> None:
        reading = self._reading
        if reading is not None and hasattr(reading, "close"):
            reading.close()  # the log's file, now rather than at the collector's leisure


def records_through(log: WriteAheadLog, after_lsn: int, upto: int) -> Iterable[tuple[int, bytes]]:
    """(LSN, payload) of the records after `after_lsn` (at least 1) through `upto`, which
    was appended, in order: from memory when the log keeps them all there, else (and from
    0: the log says where its records begin) from the log once `upto` is durable, as
    `log.read(after_lsn)` gives them (maybe past `upto`: the caller stops there; `Gone`
    as it raises it). From memory, they may not be durable yet: whatever is made of them
    is shown to no one before `log.wait_durable(upto)` has returned (`wal_recent`)."""
    if after_lsn > 0:
        kept = log.recent.through(after_lsn, upto)
        if kept is not None:
            return kept
    log.wait_durable(upto)
    return log.read(after_lsn)
