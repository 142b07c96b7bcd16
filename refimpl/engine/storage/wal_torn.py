"""Whether a bad frame of the last log segment is a write a crash cut short (a torn tail,
cut back on open) or damage (the log refuses to open): `torn_write`, for
`wal_segments.scan_segments`.

The rule rests on how the log writes (`wal.WriteAheadLog`, `wal_zeros`): zeros are written
only past the end the leader has claimed, never over a record, and a leader issues its write
only after the previous flush's write was synced. A record is acknowledged only after a sync
that covers its write and so every earlier write of its segment (a segment is synced before
the next one is written). A crash leaves each 512-byte sector of the unsynced write either
written or as it was: zeros, past the last durable frame. So a bad frame with a sector's
share of its span still all zeros belongs to the one write no sync covered, and neither it
nor any frame after it in the file (the rest of that write) was acknowledged: cutting from it
on loses no acknowledged record, even when valid frames of that write follow it.

What the rule cannot tell apart (spec/changes.md, "Damage and recovery"): a record whose
payload holds a whole sector of zeros and that the medium later damages reads as torn and is
cut, as PostgreSQL's recovery ends its log at the first invalid record.
"""

from __future__ import annotations

import mmap
import zlib
from struct import Struct

# The first 8 bytes of a frame as `wal_segments` writes them: payload length and CRC32 of the
# bytes from 8 on (its LSN, then its payload). The header is 16 bytes.
_LENGTH_CRC = Struct("<II")
_HEADER_SIZE = 16
_SECTOR = 512  # the smallest unit a disk writes whole (or not at all) in a crash
_ZERO_SECTOR = bytes(_SECTOR)

# A segment's bytes as a scan reads them: a file's mapping, or bytes.
Data = bytes | mmap.mmap


# Why a frame the sectors call torn is damage when its checksum matches a shorter frame.
LENGTH_DAMAGED = "a whole frame's length field is damaged (its checksum matches a shorter frame)"


def torn_write(
    data: Data, pos: int, cut_short: bool, following: int | None
) -> tuple[bool, str | None]:
    """Whether the bad frame at `pos` of the last segment is a torn write (cut from `pos` on),
    and, when it is damage for `LENGTH_DAMAGED`'s reason alone, that reason.

    `cut_short`: the end of the file cuts the frame short. `following`: the offset of the
    first valid frame after it with a higher LSN, or None. With one, the bad frame's span
    ends there and it is torn when a sector of that span never reached the disk; the sector
    holding the valid frame's first bytes counts whole (those bytes show whether it landed),
    no later sector at all (a record after it may hold zeros). Without one, its span ends at
    its last non-zero byte or where its length says, whichever is further, and a frame the
    file's end cuts short is torn too. Either way a frame whole and sound but for its length
    field is damage (its length then reads past the zeros or the file's end, as a write cut
    short leaves it, yet it was written whole and may have been acknowledged).
    """
    if following is not None:
        sums_to = zlib.crc32(memoryview(data)[pos + 8 : following])
        whole = following - pos >= _HEADER_SIZE and sums_to == _LENGTH_CRC.unpack_from(data, pos)[1]
        return not whole and _unwritten_sector(data, pos, following, len(data)), None
    last = _nonzero_end(data, pos)
    if len(data) - pos >= _HEADER_SIZE:
        last = max(last, min(len(data), pos + _HEADER_SIZE + _LENGTH_CRC.unpack_from(data, pos)[0]))
    if not (cut_short or _unwritten_sector(data, pos, last, last)):
        return False, None
    if _whole_but_its_length(data, pos):
        return False, LENGTH_DAMAGED
    return True, None


def _unwritten_sector(data: Data, pos: int, stop: int, bound: int) -> bool:
    """Whether some disk sector that begins before `stop` has all zeros from `pos` (or its
    start) up to its end or `bound`, whichever comes first."""
    sector = pos - pos % _SECTOR
    while sector < stop:
        share = data[max(sector, pos) : min(sector + _SECTOR, bound)]
        if share == _ZERO_SECTOR[: len(share)]:
            return True
        sector += _SECTOR
    return False


def _nonzero_end(data: Data, start: int) -> int:
    """One past the last non-zero byte of `data` from `start` on (`start` when none is),
    found backwards a sector at a time (the zeros written ahead are many)."""
    last = len(data)
    while last > start and data[max(start, last - _SECTOR) : last] == _ZERO_SECTOR[: last - start]:
        last = max(start, last - _SECTOR)
    if last > start:
        low = max(start, last - _SECTOR)
        last = low + len(data[low:last].rstrip(b"\0"))
    return last


def _whole_but_its_length(data: Data, pos: int) -> bool:
    """Whether the bad frame at `pos`, the last, is whole and sound but for its length
    field: its checksum matches its bytes up to an end between its last non-zero byte and a
    sector past it (a payload may end in zeros). A frame a crash cut short matches no such
    end (but by a chance of one in 2**32 a try)."""
    size = len(data)
    if size - pos < _HEADER_SIZE:
        return False
    crc = _LENGTH_CRC.unpack_from(data, pos)[1]
    end = max(_nonzero_end(data, pos), pos + _HEADER_SIZE)
    summed = zlib.crc32(memoryview(data)[pos + 8 : end])
    for _ in range(min(size - end, _SECTOR) + 1):
        if summed == crc:
            return True
        summed = zlib.crc32(b"\0", summed)  # the next byte, a zero (past the last non-zero)
    return False
