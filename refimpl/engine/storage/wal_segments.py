"""Framing, segment files, the validating scan of the write-ahead log and the reading of
its frames (a record at a time, `read_frames`, or in runs, `frame_runs`).

A segment file is a run of frames, one per record, with no file header:

    offset 0   u32  payload length
    offset 4   u32  CRC32 (zlib) of the LSN and the payload, i.e. of bytes 8 .. end
    offset 8   u64  LSN
    offset 16  payload

Integers are little-endian. The LSN sits right before the payload so that one crc32 call over one
contiguous slice checks both; that equals ``crc32(payload, crc32(lsn as u64))``.

A segment is named by the first LSN it holds, zero-padded to 20 digits, so that names sort in LSN
order. `scan_segments` is the one place that decides what is a torn tail (cut back on open) and
what is damage (the log refuses to open); `WriteAheadLog` and `inspect_log` both use it.

A torn tail is what a write cut short by a crash leaves in the last file: a frame that the
file's end cuts short (a partial header, or fewer payload bytes than its length says), or one
with a disk sector never written (still the zeros written ahead of the log), and whatever
follows it (`wal_torn`). Zero bytes after the last valid frame are the log's end. A whole frame
(its header and all its payload bytes present, each sector written) whose checksum fails is
not a torn write: it held a record that was written whole, maybe acknowledged, and is damage,
also at the very end of the log.
"""

from __future__ import annotations

import mmap
import os
import re
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from struct import Struct
from typing import BinaryIO

from refimpl.engine.storage.wal_crc import KnownTail
from refimpl.engine.storage.wal_seals import Seal, covers, read_seal
from refimpl.engine.storage.wal_torn import Data, torn_write
from refimpl.errors import CorruptLog

HEADER = Struct("<IIQ")  # payload length, CRC32, LSN
HEADER_SIZE = HEADER.size
MAX_PAYLOAD = 0xFFFF_FFFF
# One sparse index entry every this many records of a segment: memory stays tiny while a read
# from any LSN skips at most this many frames (headers only) before its first record.
INDEX_EVERY = 16  # a read from a recent position skips at most this many frames
# What `frame_runs` reads at a time: a run's frames (a few thousand small records).
RUN_BYTES = 1 << 20

# A header's two parts: its length and checksum, then its LSN (packed first: it is summed).
LENGTH_CRC = Struct("<II")
LSN_FIELD = Struct("<Q")
_SEGMENT_NAME = re.compile(r"^(\d{20})\.wal$")
_NONZERO = re.compile(rb"[^\x00]")


def segment_name(first_lsn: int) -> str:
    """The file name of the segment whose first record has LSN `first_lsn`."""
    return f"{first_lsn:020d}.wal"


def parse_segment_name(name: str) -> int | None:
    """The first LSN a segment file name stands for, or None for a file that is no segment."""
    match = _SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


def frame_header(
    lsn: int, payload: bytes | bytearray | memoryview, known: KnownTail | None = None
) -> bytes:
    """The 16 header bytes that precede `payload` in the frame of record `lsn`; with `known`
    (made of this payload), only the bytes before its start are summed."""
    lsn_bytes = LSN_FIELD.pack(lsn)
    seed = zlib.crc32(lsn_bytes)
    crc = zlib.crc32(payload, seed) if known is None else known.checksum(payload, seed)
    return LENGTH_CRC.pack(len(payload), crc) + lsn_bytes


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment file as the log's in-memory index knows it.

    An empty segment (possible only as the last one) has ``last_lsn == first_lsn - 1``. `size`
    counts the bytes of every record appended to it, also those not yet flushed to the file.
    """

    first_lsn: int
    last_lsn: int
    path: Path
    size: int


class Segment:
    """The mutable index entry of one segment, owned by a `WriteAheadLog`.

    The log changes it only under its lock; `seek_hint` must be called under that lock too.
    A record added as the last (by the log's append and by a scan's walk, each written out
    where it runs: a call a record cost them a share of their time) sets `last_lsn` and
    `size`, and goes in the sparse index (`index_lsns`, `index_offsets`) when its LSN is
    `first_lsn` plus a multiple of INDEX_EVERY.
    """

    __slots__ = (
        "first_lsn",
        "last_lsn",
        "path",
        "size",
        "index_lsns",
        "index_offsets",
        "on_disk",
        "crc",
        "written",
    )

    def __init__(self, first_lsn: int, path: Path, *, on_disk: bool) -> None:
        self.first_lsn = first_lsn
        self.last_lsn = first_lsn - 1
        self.path = path
        self.size = 0
        self.index_lsns: list[int] = []
        self.index_offsets: list[int] = []
        # False until the file exists and its name is synced in the folder (only the flushing
        # leader creates segment files, after the previous segment is on disk).
        self.on_disk = on_disk
        self.crc = 0  # CRC32 of the bytes written to the file so far (its seal's checksum)
        # Bytes of records in the file (the leader's; zeros past them are no record's).
        self.written = 0

    @property
    def records(self) -> int:
        return self.last_lsn - self.first_lsn + 1

    def seek_hint(self, lsn: int) -> tuple[int, int]:
        """(LSN, offset) of an indexed record at or before `lsn`, where a read of `lsn` starts."""
        j = bisect_right(self.index_lsns, lsn) - 1
        if j < 0:
            return self.first_lsn, 0
        return self.index_lsns[j], self.index_offsets[j]

    def info(self) -> SegmentInfo:
        return SegmentInfo(self.first_lsn, self.last_lsn, self.path, self.size)

    def seal(self) -> Seal:
        """The seal of this segment as it stands (see wal_seals)."""
        return Seal(
            self.first_lsn, self.last_lsn, self.size, self.crc, self.index_lsns, self.index_offsets
        )

    @classmethod
    def from_seal(cls, seal: Seal, path: Path) -> Segment:
        segment = cls(seal.first_lsn, path, on_disk=True)
        segment.last_lsn, segment.size, segment.crc = seal.last_lsn, seal.size, seal.crc
        segment.written = seal.size
        segment.index_lsns, segment.index_offsets = seal.index_lsns, seal.index_offsets
        return segment


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of the last segment from a torn write on (`wal_torn`): a bad frame
    and, when valid frames of the same unacknowledged write follow it, those up to LSN
    `dropped_to` (0 when none follows)."""

    path: Path
    offset: int
    length: int
    after_lsn: int
    dropped_to: int = 0

    def where(self) -> str:
        after = f"after LSN {self.after_lsn}" if self.after_lsn > 0 else "before any record"
        if self.dropped_to > self.after_lsn:
            after += f"; LSN {self.after_lsn + 1} to {self.dropped_to} dropped with it"
        return f"{self.length} bytes from {self.path} at offset {self.offset} ({after})"


@dataclass(frozen=True, slots=True)
class Damage:
    """A bad frame or a break in the LSN sequence that is not a torn tail.

    `first_lost_lsn` is the LSN the bad frame should hold; `last_lost_lsn` the highest LSN found
    intact after it (in this segment or later ones), or `first_lost_lsn` when none is.
    """

    path: Path
    offset: int
    reason: str
    first_lost_lsn: int = 0
    last_lost_lsn: int = 0

    def lost(self) -> str:
        """The LSNs that opening the log up to the damage only would lose, as words."""
        if self.last_lost_lsn > self.first_lost_lsn:
            return f"LSN {self.first_lost_lsn} to {self.last_lost_lsn}"
        return f"LSN {self.first_lost_lsn}"


@dataclass
class ScanResult:
    """What `scan_segments` found: the valid segments, and at most one tail or damage."""

    segments: list[Segment] = field(default_factory=list)
    torn_tail: TornTail | None = None
    damage: Damage | None = None
    walked: list[Segment] = field(default_factory=list)  # sealed ones checked frame by frame

    @property
    def records(self) -> int:
        return sum(segment.records for segment in self.segments)


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """(first LSN, path) of every segment file in `directory`, in LSN order.

    Files whose names are not segment names are not the log's and are left alone.
    """
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            first_lsn = parse_segment_name(entry.name)
            if first_lsn is not None and entry.is_file():
                found.append((first_lsn, Path(entry.path)))
    found.sort()
    return found


def scan_segments(
    listing: list[tuple[int, Path]],
    *,
    use_seals: bool = False,
    on_read: Callable[[int], None] | None = None,
) -> ScanResult:
    """Reads and validates every frame of the listed segments without changing any file.

    Stops at the first damage. A bad frame is a torn tail only in the last segment, and only
    when `wal_torn.torn_write` says so: valid frames after it in that segment are then of the
    same unacknowledged write and cut with it. Anything else is damage, as is any valid frame
    whose LSN is not the previous one + 1 (across segments too). With `use_seals`, a segment
    before the last whose seal matches its bytes is taken from the seal without a walk
    (wal_seals), and of a segment whose seal covers a prefix only the rest is walked; those
    before the last that needed a walk are listed in `walked`. `on_read` hears the size of
    each segment once it has been read (a long check tells its progress by it).
    """
    result = ScanResult()
    previous_last: int | None = None
    for k, (first_lsn, path) in enumerate(listing):
        is_last = k == len(listing) - 1
        if first_lsn < 1:
            result.damage = Damage(path, 0, "a segment name must be an LSN of 1 or more")
            return result
        if previous_last is not None and first_lsn != previous_last + 1:
            result.damage = Damage(
                path,
                0,
                f"the segment starts at LSN {first_lsn} but LSN {previous_last + 1} was expected,"
                " so a segment is missing or misnamed",
            )
            return result
        data = _mapped(path)
        if on_read is not None:
            on_read(len(data))
        seal = read_seal(path) if use_seals else None
        if seal is not None and covers(seal, first_lsn, data):
            segment = Segment.from_seal(seal, path)  # the walk goes on after the seal
        else:
            segment = Segment(first_lsn, path, on_disk=True)
        walk_from = segment.size
        end, reason, cut_short = _walk_frames(data, segment)
        segment.written = end
        if reason is not None and _only_zeros(data, end):
            reason = None  # only zeros follow: written ahead of the log (wal_zeros), its end
        if end > walk_from or reason is not None:
            segment.crc = zlib.crc32(memoryview(data)[:end])
            if not is_last:
                result.walked.append(segment)
        result.segments.append(segment)
        if reason is not None:
            following = find_valid_frame(data, end + 1, segment.last_lsn)
            at = None if following is None else following[0]
            torn, why = torn_write(data, end, cut_short, at) if is_last else (False, None)
            reason = why or reason
            if following is not None and not torn:
                reason += f", yet a valid frame of LSN {following[1]} follows at offset"
                reason += f" {following[0]}"
            elif not is_last:
                reason += ", in a segment that is not the last one"
            lost_from = segment.last_lsn + 1
            if not torn:
                lost_to = max(lost_from, _last_lsn_after(data, end, listing[k + 1 :], lost_from))
                result.damage = Damage(path, end, reason, lost_from, lost_to)
                return result
            dropped = 0 if at is None else _last_lsn_after(data, end, [], lost_from)
            result.torn_tail = TornTail(path, end, len(data) - end, segment.last_lsn, dropped)
        elif segment.records == 0 and not is_last:
            result.damage = Damage(
                path,
                0,
                "the segment holds no record, yet a later one follows",
                first_lsn,
                _last_lsn_after(b"", 0, listing[k + 1 :], first_lsn),
            )
            return result
        previous_last = segment.last_lsn
    return result


def _only_zeros(data: Data, start: int) -> bool:
    """Whether every byte of `data` from `start` on is zero: counted in C a megabyte at a
    time (the zeros a log writes ahead of its end, up to a megabyte and a half, are counted
    at every open; a search for a non-zero byte took several times as long)."""
    size = len(data)
    while start < size:
        piece = data[start : start + RUN_BYTES]
        if piece.count(0) != len(piece):
            return False
        start += RUN_BYTES
    return True


def _mapped(path: Path) -> Data:
    """The bytes of a segment file, mapped rather than read into a copy: opening checks
    every byte of a segment (up to 64 MB) once, and a copy of them costs more than the
    check. A segment is only ever appended to while mapped here (a torn tail is cut after
    its scan is done), so no page a scan reads goes away under it."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return b""  # an empty file cannot be mapped
        return mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)


def _last_lsn_after(data: Data, start: int, later: list[tuple[int, Path]], after_lsn: int) -> int:
    """The highest LSN of a whole valid frame after `start` in `data` or in the `later` files.

    Only for reporting what damage costs: a frame found here is not trusted for anything else.
    """
    highest = 0
    position = start + 1
    while (found := find_valid_frame(data, position, max(after_lsn - 1, highest))) is not None:
        offset, highest = found
        # Frames follow one another: the next search starts where this frame ends, so a run
        # of intact frames costs one check each, not a search through every byte.
        position = offset + HEADER_SIZE + HEADER.unpack_from(data, offset)[0]
    for first_lsn, path in later:
        segment = Segment(first_lsn, path, on_disk=True)
        _walk_frames(path.read_bytes(), segment)
        highest = max(highest, segment.last_lsn)
    return highest


def valid_end(data: Data, first_lsn: int) -> tuple[int, int]:
    """Where the run of valid frames at the start of `data` (a segment's bytes, its first
    record `first_lsn`) ends: the offset after its last valid frame and that frame's LSN
    (`first_lsn - 1` when there is none)."""
    segment = Segment(first_lsn, Path(), on_disk=True)
    return _walk_frames(data, segment)[0], segment.last_lsn


def _walk_frames(data: Data, segment: Segment) -> tuple[int, str | None, bool]:
    """Adds the run of valid frames at the start of `data` to `segment`.

    Starts after what `segment` already holds (nothing, or what its seal covers). Returns
    the offset where that run ends, why the frame there is bad (None at the end of the file),
    and whether the end of the file cuts that frame short (what a torn write leaves).
    """
    view = memoryview(data)
    size = len(data)
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    expected = segment.last_lsn + 1
    pos = segment.size
    # Each frame added as `Segment` says, written out: a crash leaves the last segment, up
    # to a million small frames, to walk, and a call per frame was a third of the walk.
    index_lsns, index_offsets = segment.index_lsns, segment.index_offsets
    to_index = expected + (segment.first_lsn - expected) % INDEX_EVERY  # next LSN indexed
    reason: str | None = None
    cut_short = False
    while pos < size:
        if size - pos < HEADER_SIZE:
            reason, cut_short = f"a partial frame header of {size - pos} bytes", True
            break
        length, crc, lsn = unpack(data, pos)
        end = pos + HEADER_SIZE + length
        if end > size:
            if crc32(view[pos + 8 :]) == crc:
                # The rest of the file is this frame, whole and sound, but for its length: a
                # damaged length field, not a write cut short.
                reason = f"a whole frame's length reads {length}, past the file's end"
            else:
                reason = f"a frame of {length} payload bytes runs past the end of the file"
                cut_short = True
            break
        if crc32(view[pos + 8 : end]) != crc:
            reason = "a whole frame's checksum does not match its contents"
            break
        if lsn != expected:
            reason = f"the frame holds LSN {lsn} where LSN {expected} was expected"
            break
        if lsn == to_index:
            index_lsns.append(lsn)
            index_offsets.append(pos)
            to_index += INDEX_EVERY
        expected += 1
        pos = end
    if pos > segment.size:
        segment.last_lsn, segment.size = expected - 1, pos
    return pos, reason, cut_short


@dataclass(frozen=True, slots=True)
class ReadStep:
    """One segment's share of a read, planned under the log's lock and run without it."""

    path: Path
    offset: int  # where the frame of start_lsn begins
    start_lsn: int
    end_lsn: int  # last LSN to read from this segment


def read_frames(file: BinaryIO, step: ReadStep, first: int) -> Iterator[tuple[int, bytes]]:
    """The records `first` .. `step.end_lsn` of one segment; frames before `first` skipped."""
    unpack = HEADER.unpack
    crc32 = zlib.crc32
    file.seek(step.offset)
    offset = step.offset
    lsn = step.start_lsn - 1
    while lsn < step.end_lsn:
        header = file.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            raise CorruptLog(str(step.path), offset, f"the file ends before LSN {lsn + 1}")
        length, crc, found = unpack(header)
        if found != lsn + 1:
            raise CorruptLog(str(step.path), offset, f"found LSN {found} where {lsn + 1} belongs")
        lsn = found
        if lsn < first:
            file.seek(length, os.SEEK_CUR)  # skipped records cost no payload read
        else:
            payload = file.read(length)
            if len(payload) < length or crc32(payload, crc32(header[8:])) != crc:
                raise CorruptLog(str(step.path), offset, f"the frame of LSN {lsn} is damaged")
            yield lsn, payload
        offset += HEADER_SIZE + length


def frame_runs(
    step: ReadStep, first: int, checked_through: int
) -> Iterator[tuple[int, list[memoryview]]]:
    """The payloads of records `first` .. `step.end_lsn` of one segment, in runs of
    consecutive records: (LSN of the run's first, its payloads in LSN order). Frames
    before `first` are skipped unread.

    Each frame is checked as `WriteAheadLog.read` checks it (its LSN, and its checksum
    unless its LSN is `checked_through` or less: bytes the caller knows were checked), and
    `CorruptLog` names the frame that fails. A run is the frames of one read of
    `RUN_BYTES` or so: a loop over it costs a step per frame and nothing more, where a
    record at a time costs two file reads and a generator's step each. Raises OSError
    when the file cannot be read.
    """
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    path, offset, end_lsn, lsn = step.path, step.offset, step.end_lsn, step.start_lsn - 1
    with open(path, "rb", buffering=0) as file:
        file.seek(offset)
        data, pos = b"", 0
        while lsn < end_lsn:
            # Refill: the unread rest of the last read, and at least the whole next frame.
            rest = data[pos:]
            wanted = RUN_BYTES
            if len(rest) >= HEADER_SIZE:
                wanted = max(wanted, HEADER_SIZE + unpack(rest, 0)[0] - len(rest))
            more = file.read(wanted)
            if not more:
                raise CorruptLog(str(path), offset, f"the file ends before LSN {lsn + 1}")
            data, pos = rest + more, 0
            size = len(data)
            view = memoryview(data)
            run: list[memoryview] = []
            while lsn < end_lsn and pos + HEADER_SIZE <= size:
                length, crc, found = unpack(data, pos)
                end = pos + HEADER_SIZE + length
                if end > size:
                    break  # the frame goes on in the next read
                if found != lsn + 1:
                    where = offset + pos
                    raise CorruptLog(str(path), where, f"found LSN {found} where {lsn + 1} belongs")
                lsn = found
                if lsn >= first:
                    if lsn > checked_through and crc32(view[pos + 8 : end]) != crc:
                        where = offset + pos
                        raise CorruptLog(str(path), where, f"the frame of LSN {lsn} is damaged")
                    run.append(view[pos + HEADER_SIZE : end])
                pos = end
            offset += pos
            if run:
                yield lsn - len(run) + 1, run


def find_valid_frame(data: Data, start: int, after_lsn: int) -> tuple[int, int] | None:
    """(offset, LSN) of the first whole valid frame at or after `start` with an LSN > `after_lsn`.

    Tries every byte offset, since a damaged length field loses the frame boundaries. Runs of
    zero bytes (the usual torn tail) are skipped at C speed: an LSN > 0 has a non-zero byte.
    """
    view = memoryview(data)
    size = len(data)
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    q = start
    while q + HEADER_SIZE <= size:
        length, crc, lsn = unpack(data, q)
        if lsn == 0:
            # Bytes q+8 .. q+15 are zero; the next offset whose LSN field holds a non-zero byte p
            # is at least p - 15.
            match = _NONZERO.search(data, q + HEADER_SIZE)
            if match is None:
                return None
            q = max(q + 1, match.start() - (HEADER_SIZE - 1))
            continue
        end = q + HEADER_SIZE + length
        if lsn > after_lsn and end <= size and crc32(view[q + 8 : end]) == crc:
            return q, lsn
        q += 1
    return None


def segment_runs(
    batch: list[tuple[Segment, bytearray]],
) -> list[tuple[Segment, list[bytearray]]]:
    """A log's batch of buffers (each with the segment it goes to, in log order) as runs:
    each segment with its buffers together, in order."""
    if len(batch) == 1:  # most flushes: one buffer
        segment, data = batch[0]
        return [(segment, [data])]
    runs: list[tuple[Segment, list[bytearray]]] = []
    for segment, data in batch:
        if runs and runs[-1][0] is segment:
            runs[-1][1].append(data)
        else:
            runs.append((segment, [data]))
    return runs
