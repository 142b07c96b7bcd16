"""How far each replication slot is behind its database's durable log, for /metrics.

A slot's lag is told two ways (spec: operations, replication): in LSNs, the durable
transactions its client has not confirmed whole, and in bytes, what the log files hold of
those transactions (each record's frame, header included). The bytes are found from the
log's segments: whole segments by their size, and inside the segment where the lag starts
or ends by walking frame headers from the last place walked (kept per segment), so a
scrape reads only the frames written or confirmed since the last one.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine import replication_positions as positions
from refimpl.engine.instance import Instance
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER, HEADER_SIZE, SegmentInfo
from refimpl.errors import UnknownDatabase

_KEPT_PLACES = 64  # frame starts remembered per segment (a few per slot suffice)


@dataclass(frozen=True, slots=True)
class SlotLag:
    slot: str
    database: str
    lag_lsns: int  # durable transactions the slot's client has not confirmed whole
    lag_bytes: int  # what the log files hold of them
    active: bool  # a client streams from it now


class SlotLags:
    """Reads every slot's lag of one instance; keeps where frames start between reads.
    Thread-safe."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self._lock = threading.Lock()
        self._places: dict[Path, list[tuple[int, int]]] = {}  # segment -> (LSN, offset)

    def read(self) -> list[SlotLag]:
        """Every slot of the data folder; a slot of a dropped database is left out."""
        lags: list[SlotLag] = []
        with self._lock:
            kept: set[Path] = set()
            for slot in self.instance.slots.all():
                try:
                    log = self.instance.database(slot.database).log
                except UnknownDatabase:
                    continue
                durable = log.durable_lsn
                done = positions.resume(slot.confirmed).done_lsn
                segments = log.segments()
                kept.update(s.path for s in segments)
                lag = SlotLag(
                    slot.name,
                    slot.database,
                    max(0, durable - done),
                    self._bytes_between(log, segments, done, durable),
                    slot.active_pid is not None,
                )
                lags.append(lag)
            for path in set(self._places) - kept:
                del self._places[path]  # a removed segment, or one of a dropped database
        return lags

    def _bytes_between(
        self, log: WriteAheadLog, segments: list[SegmentInfo], done: int, durable: int
    ) -> int:
        """The bytes of the records `done + 1` .. `durable` in the log's files (those no
        longer kept count from the oldest kept)."""
        first = max(done + 1, log.oldest_lsn)
        if first > durable:
            return 0
        total = 0
        for segment in segments:
            if segment.last_lsn < first or segment.first_lsn > durable:
                continue
            start = self._frame_start(segment, max(first, segment.first_lsn))
            end = (
                segment.size
                if segment.last_lsn <= durable
                else self._frame_start(segment, durable + 1)
            )
            if start is None or end is None:
                return total  # the segment went while read: what was counted stands
            total += end - start
        return total

    def _frame_start(self, segment: SegmentInfo, lsn: int) -> int | None:
        """Where the frame of record `lsn` starts in the segment's file (its size for the
        record after its last); None when the file is gone. Walks from the nearest place
        known before it: only records at or below the durable LSN are walked, which are
        on disk."""
        if lsn == segment.first_lsn:
            return 0
        places = self._places.setdefault(segment.path, [])
        at = bisect_right(places, (lsn, -1)) - 1
        known_lsn, offset = places[at] if at >= 0 else (segment.first_lsn, 0)
        if known_lsn == lsn:
            return offset
        try:
            with open(segment.path, "rb") as file:
                file.seek(offset)
                while known_lsn < lsn:
                    header = file.read(HEADER_SIZE)
                    if len(header) < HEADER_SIZE:
                        return None
                    length, _crc, _found = HEADER.unpack(header)
                    offset += HEADER_SIZE + length
                    known_lsn += 1
                    file.seek(offset)
        except OSError:
            return None
        places.insert(at + 1, (lsn, offset))
        if len(places) > _KEPT_PLACES:
            del places[0]  # the oldest place: slots only move forward
        return offset
