"""The event stream's `Content-Encoding: deflate` (spec/stream.md, compression).

A stream whose client accepts `deflate` is one zlib stream (RFC 1950) made of pieces that
can be shared: each part is its own raw deflate segment (a fresh compressor, ended by a
sync flush, so that it refers to nothing before it and ends on a byte), which is valid
after any other. The part many streams share is so compressed once for all of them, as
its plain bytes are made once. What each stream keeps of its own is the running Adler-32
of what it was sent (`Checksum`), which its last part carries after a final segment.

What a caller may rely on: `HEAD`, then `segment(...)`s of every part in the order they go
out, then `last(...)` of the end, decompress to the concatenation of those parts' plain
bytes and end the zlib stream whole, its checksum checked.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

# The zlib header (deflate, 32 KB window declared, fastest level): a decoder's window may be
# larger than the 4 KB the segments use.
HEAD = b"\x78\x01"
# A segment's compressor: the fastest level, a 4 KB window and little memory, so that one
# costs about 10 us to set up for a one-event part and compresses a 200 KB part of events
# about sevenfold in about 1 ms.
_LEVEL, _WBITS, _MEMLEVEL = 1, -12, 5
_ADLER_BASE = 65521


def accepts_deflate(header: str | None) -> bool:
    """Whether an Accept-Encoding header accepts `deflate` (named, or `*`, with a q above
    zero; named at q=0 refuses it whatever `*` says)."""
    if not header:
        return False
    star = False
    for item in header.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if coding not in ("deflate", "*"):
            continue
        accepted = _quality(params) > 0.0
        if coding == "deflate":
            return accepted
        star = accepted
    return star


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0  # a q it cannot read: not taken as an acceptance
    return 1.0


def segment(data: bytes) -> bytes:
    """`data` as a raw deflate segment that may follow any other (sync-flushed, no final
    block, no reference to what came before)."""
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


@dataclass(frozen=True, slots=True)
class Piece:
    """A part's compressed bytes, with the Adler-32 and length of its plain bytes."""

    body: bytes
    adler: int
    size: int


def piece(data: bytes) -> Piece:
    """`data` compressed as a segment, with what a stream's `Checksum` adds of it."""
    return Piece(segment(data), zlib.adler32(data), len(data))


def combine(first: int, second: int, second_size: int) -> int:
    """The Adler-32 of two byte strings one after the other, from theirs (zlib's
    adler32_combine)."""
    rem = second_size % _ADLER_BASE
    sum1 = first & 0xFFFF
    sum2 = (rem * sum1) % _ADLER_BASE
    sum1 += (second & 0xFFFF) + _ADLER_BASE - 1
    sum2 += (first >> 16) + (second >> 16) + _ADLER_BASE - rem
    return (sum1 % _ADLER_BASE) | ((sum2 % _ADLER_BASE) << 16)


def add_to_each(checksums: list[Checksum], part: Piece) -> None:
    """`Checksum.add(part)` for each of `checksums`: a shared part's round over a thousand
    streams, the arithmetic of `combine` inlined (about half a microsecond a stream)."""
    rem = part.size % _ADLER_BASE
    low = (part.adler & 0xFFFF) + _ADLER_BASE - 1
    high = (part.adler >> 16) + _ADLER_BASE - rem
    base = _ADLER_BASE
    for checksum in checksums:
        value = checksum.value
        sum1 = value & 0xFFFF
        checksum.value = ((sum1 + low) % base) | (
            ((rem * sum1 + (value >> 16) + high) % base) << 16
        )


class Checksum:
    """The running Adler-32 of what one stream was sent, part by part, in order."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 1  # Adler-32 of nothing

    def add(self, part: Piece) -> None:
        self.value = combine(self.value, part.adler, part.size)

    def last(self, data: bytes) -> bytes:
        """The stream's last bytes: `data` in a final segment, then the checksum of all."""
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL)
        body = compressor.compress(data) + compressor.flush(zlib.Z_FINISH)
        total = combine(self.value, zlib.adler32(data), len(data))
        return body + total.to_bytes(4, "big")
