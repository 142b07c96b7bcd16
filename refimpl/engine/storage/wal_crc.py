"""A frame's CRC-32 worked out mostly before its LSN is known (a bulk load's large record).

A frame's checksum covers its LSN and then its payload (`wal_segments.frame_header`), and
the LSN is known only under the write lock. CRC-32 is linear, so the checksum of a
concatenation follows from the checksums of its parts and the length of the second
(zlib's `crc32_combine`, which Python's zlib does not offer): `KnownTail` holds the checksum
of the payload from some offset on and the linear map that carries a checksum over that many
bytes, both made with no lock held; under the lock only the few bytes before the offset (the
LSN, the record's commit time) are summed and combined with it, a few microseconds however
large the payload.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

_POLYNOMIAL = 0xEDB88320  # CRC-32 (zlib's), bits reversed
Operator = tuple[int, ...]  # a 32x32 matrix over GF(2), one column a bit


def _times(matrix: Operator, vector: int) -> int:
    total = 0
    column = 0
    while vector:
        if vector & 1:
            total ^= matrix[column]
        vector >>= 1
        column += 1
    return total


def _compose(outer: Operator, inner: Operator) -> Operator:
    return tuple(_times(outer, column) for column in inner)


def shift_operator(length: int) -> Operator:
    """The linear map that carries a CRC-32 register over `length` zero bytes."""
    # One zero bit, then squared three times: one zero byte.
    power: Operator = (_POLYNOMIAL, *(1 << n for n in range(31)))
    for _ in range(3):
        power = _compose(power, power)
    result: Operator = tuple(1 << n for n in range(32))
    while length:
        if length & 1:
            result = _compose(power, result)
        length >>= 1
        if length:
            power = _compose(power, power)
    return result


def combine(first: int, shift: Operator, second: int) -> int:
    """crc32(a + b) from crc32(a), `shift_operator(len(b))` and crc32(b)."""
    return _times(shift, first) ^ second


@dataclass(frozen=True, slots=True)
class KnownTail:
    """The CRC-32 of a payload from `start` on, and the map over those bytes' length."""

    start: int
    crc: int
    shift: Operator

    @classmethod
    def of(cls, payload: bytes | bytearray, start: int) -> KnownTail:
        """Sums `payload[start:]`; the bytes before `start` may still change."""
        tail = memoryview(payload)[start:]
        return cls(start, zlib.crc32(tail), shift_operator(len(tail)))

    def checksum(self, payload: bytes | bytearray | memoryview, seed: int) -> int:
        """zlib.crc32(payload, seed), `payload` the one this tail was made of, with only
        the bytes before `start` changed since."""
        head = zlib.crc32(memoryview(payload)[: self.start], seed)
        return combine(head, self.shift, self.crc)
