"""Seals: what a sealed log segment holds, written beside it, so that opening the log checks
the segment at C speed instead of walking its frames one by one in Python.

When the log moves on to a new segment, the one it leaves never changes again; and when the
log is closed, its last segment holds what it holds until the next open appends to it. Then
the segment gets a seal, `<segment name without .wal>.seal`: the segment's size, the CRC32 of
all those bytes, its first and last LSN and its sparse seek index, and a CRC32 of its own.
Opening the log compares one CRC32 of the segment's first `size` bytes with the seal: equal,
those bytes are exactly what was written, and only what follows them (what was appended
after the seal, or a torn tail) is walked frame by frame. Anything else (no seal, a torn or
damaged seal, a file shorter than its seal or not of its checksum) and the whole segment is
walked as without seals, which finds and places any damage.

So a seal only ever saves time: it is written without fsync (a seal lost in a crash costs a
walk at the next open), a failure to write it changes nothing, and the checks of
`refimpl check` always walk every frame.
"""

from __future__ import annotations

import mmap
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from refimpl.engine.files import FileOps, write_all

SEAL_SUFFIX = ".seal"
_VERSION = 1
_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True, slots=True)
class Seal:
    """What a sealed segment holds, as its seal file says."""

    first_lsn: int
    last_lsn: int
    size: int
    crc: int  # CRC32 of the segment's `size` bytes
    index_lsns: list[int]
    index_offsets: list[int]


def seal_path(segment_path: Path) -> Path:
    """Where the seal of a segment lives: beside it, named like it."""
    return segment_path.with_suffix(SEAL_SUFFIX)


def encode(seal: Seal) -> bytes:
    body = _encoder.encode(
        [
            _VERSION,
            seal.first_lsn,
            seal.last_lsn,
            seal.size,
            seal.crc,
            seal.index_lsns,
            seal.index_offsets,
        ]
    )
    return body + zlib.crc32(body).to_bytes(4, "little")


def decode(data: bytes) -> Seal | None:
    """The seal in `data`, or None for anything that is not a whole, sound seal."""
    if len(data) < 5 or zlib.crc32(data[:-4]) != int.from_bytes(data[-4:], "little"):
        return None
    try:
        fields = msgspec.msgpack.decode(data[:-4])
        version, first, last, size, crc, lsns, offsets = fields
    except (msgspec.DecodeError, ValueError, TypeError):
        return None
    if version != _VERSION or len(lsns) != len(offsets):
        return None
    return Seal(first, last, size, crc, lsns, offsets)


def write_seal(files: FileOps, segment_path: Path, seal: Seal) -> None:
    """Writes the seal of a segment that will not change again; any failure is left alone,
    since a missing seal costs only a walk at the next open."""
    path = seal_path(segment_path)
    try:
        fd = files.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(files, fd, encode(seal))
        finally:
            files.close(fd)
    except OSError:
        return


def read_seal(segment_path: Path) -> Seal | None:
    """The seal of a segment, or None when it has none that can be trusted."""
    try:
        data = seal_path(segment_path).read_bytes()
    except OSError:
        return None
    return decode(data)


def remove_seal(files: FileOps, segment_path: Path) -> None:
    """Removes a segment's seal, if it has one (with the segment, or when it changes)."""
    try:
        files.unlink(seal_path(segment_path))
    except FileNotFoundError:
        return


def covers(seal: Seal, first_lsn: int, data: bytes | mmap.mmap) -> bool:
    """True when `data` starts with exactly the bytes the seal describes."""
    return (
        seal.first_lsn == first_lsn
        and seal.size <= len(data)
        and seal.last_lsn >= first_lsn - 1
        and zlib.crc32(memoryview(data)[: seal.size]) == seal.crc
    )
