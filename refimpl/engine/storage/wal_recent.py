"""The newest records appended to a write-ahead log, kept in memory (`RecentRecords`).

A reader that follows the log's end (a live query's maintainer, woken by a commit the moment
it is visible) needs the records just appended, most often before their flush has ended:
read from memory, they cost it neither the wait for the flush nor a file's open and read.

What a caller may rely on: `through(after, upto)` gives exactly the records after `after` up
to `upto` as `append` was given them, in order, or None when memory does not hold all of them
(a record larger than MAX_KEPT_PAYLOAD, one older than the newest KEPT_RECORDS, or one being
replaced while read). Those records may not be durable yet: whatever a caller makes of them
is shown to no one before `WriteAheadLog.wait_durable(upto)` has returned, and never if it
raises (the log failed: those records may never reach the disk).
"""

from __future__ import annotations

KEPT_RECORDS = 256  # the newest records: a pass of woken live queries reads the last few
MAX_KEPT_PAYLOAD = 64 * 1024  # a larger record (a bulk load's) is read from the log's file


class RecentRecords:
    """The payloads of a log's newest records by LSN. `add` runs under the log's lock (one
    appender at a time); `through` needs no lock: a dict's read is whole under a write."""

    __slots__ = ("_payloads",)

    def __init__(self) -> None:
        self._payloads: dict[int, bytes] = {}

    def add(self, lsn: int, payload: bytes | bytearray | memoryview) -> None:
        """Keep `payload` as record `lsn` (the next LSN after the last added); the record
        KEPT_RECORDS before it goes. Only a bytes payload is kept: it cannot change."""
        payloads = self._payloads
        if type(payload) is bytes and len(payload) <= MAX_KEPT_PAYLOAD:
            payloads[lsn] = payload
        payloads.pop(lsn - KEPT_RECORDS, None)

    def through(self, after: int, upto: int) -> list[tuple[int, bytes]] | None:
        """(LSN, payload) of the records after `after` up to `upto`, or None when memory
        does not hold every one of them."""
        if upto - after > KEPT_RECORDS or after < 0:
            return None
        get = self._payloads.get
        found = [(lsn, get(lsn)) for lsn in range(after + 1, upto + 1)]
        if any(payload is None for _, payload in found):
            return None
        return found  # type: ignore[return-value]  # None is ruled out just above
