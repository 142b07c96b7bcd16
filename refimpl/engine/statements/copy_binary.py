"""COPY's binary format, PostgreSQL's: rows in (`BinaryRowReader`) and out (`encode_binary`).

The data is the 11-byte signature `PGCOPY\\n\\377\\r\\n\\0`, a 32-bit flags field, a 32-bit
header extension length and that many bytes (skipped), then one tuple a row (a 16-bit field
count, then each field as a 32-bit length, -1 for NULL, and that many bytes) and the trailer,
a 16-bit -1. Integers are big-endian. A field holds its column type's binary format as the
protocol sends it (spec/pgwire.md, Types): `int4`, `int8`, `float8`, UTF-8 `text`, a `bool`
byte, and `timestamptz` as microseconds since 2000-01-01 UTC.

Framing that cannot be read (a wrong signature, a critical flag, a tuple of the wrong field
count, data cut short or going on after the trailer, a field of the wrong length for its
type) is `CopyFormatError`; a value its type cannot hold (a timestamp past the range) is
`CopyError`, as in the text formats; both name the tuple (from 1) and the column.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO

from refimpl.engine.result import Column
from refimpl.engine.statements.copy_binary_chunks import (
    PG_EPOCH_MICROS,
    ChunkDecoder,
    double_checked,
    timestamp_checked,
)
from refimpl.errors import CopyError, CopyFormatError

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER = SIGNATURE + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"  # no flags, no extension
TRAILER = b"\xff\xff"
READ_BYTES = 256 * 1024
_OIDS_FLAG = 1 << 16  # WITH OIDS, which a table here never has
_CRITICAL_FLAGS = 0xFFFF  # bits a reader must understand (none is defined)
_I2, _I4, _I8, _F8 = (
    struct.Struct("!h"),
    struct.Struct("!i"),
    struct.Struct("!q"),
    struct.Struct("!d"),
)


def _double_in(data: bytes) -> float:
    return double_checked(_F8.unpack(data)[0])


def _timestamp_in(data: bytes) -> int:
    return timestamp_checked(_I8.unpack(data)[0])


# Per column type: the field's length (None: any) and its stored value.
_DECODERS: dict[str, tuple[int | None, Callable[[bytes], object]]] = {
    "INT": (4, lambda b: _I4.unpack(b)[0]),
    "BIGINT": (8, lambda b: _I8.unpack(b)[0]),
    "DOUBLE": (8, _double_in),
    "STRING": (None, lambda b: b.decode("utf-8")),
    "SYMBOL": (None, lambda b: b.decode("utf-8")),
    "BOOLEAN": (1, lambda b: b != b"\x00"),
    "TIMESTAMP": (8, _timestamp_in),
}
_TYPE_NAMES = {"INT": "int4", "BIGINT": "int8", "DOUBLE": "float8", "BOOLEAN": "bool",
               "TIMESTAMP": "timestamptz"}  # fmt: skip
ENCODERS: dict[str, Callable[[object], bytes]] = {
    "INT": _I4.pack,
    "BIGINT": _I8.pack,
    "DOUBLE": _F8.pack,
    "STRING": lambda v: str(v).encode("utf-8"),
    "SYMBOL": lambda v: str(v).encode("utf-8"),
    "BOOLEAN": lambda v: b"\x01" if v else b"\x00",
    "TIMESTAMP": lambda v: _I8.pack(v - PG_EPOCH_MICROS),  # type: ignore[operator]
    "OID": struct.Struct("!I").pack,  # a query's catalog OIDs: PostgreSQL's 4 unsigned bytes
}


def _text_encoder(value: object) -> bytes:
    return str(value).encode("utf-8")


def _text_decoder(data: bytes) -> object:
    return data.decode("utf-8")


class BinaryRowReader:
    """The rows of binary COPY data for `placed` columns (place in the table's row, column)
    of a table `width` columns wide; `rows()` yields tuples in the table's column order,
    NULL where the statement names no column."""

    def __init__(
        self, data: IO[bytes], table: str, width: int, placed: Sequence[tuple[int, Column]]
    ) -> None:
        self._data = data
        self._table = table
        self._width = width
        self._placed = placed
        self._buffer = b""
        self._at = 0
        self._tuple = 0

    def _fill(self, size: int) -> bool:
        """At least `size` unread bytes in the buffer; False when the data ends first."""
        while len(self._buffer) - self._at < size:
            block = self._data.read(READ_BYTES)
            if not block:
                return False
            self._buffer = self._buffer[self._at :] + block
            self._at = 0
        return True

    def _take(self, size: int, what: str) -> bytes:
        if not self._fill(size):
            raise self._framing(f"the data ends inside {what}")
        start = self._at
        self._at += size
        return self._buffer[start : self._at]

    def _framing(self, problem: str) -> CopyFormatError:
        where = f", tuple {self._tuple}" if self._tuple else ""
        return CopyFormatError(
            f"COPY {self._table} (FORMAT binary){where}: {problem}; send PostgreSQL's binary"
            " COPY format (signature, flags, header extension, tuples, trailer)"
        )

    def _header(self) -> None:
        if self._take(len(SIGNATURE), "the signature") != SIGNATURE:
            raise self._framing(
                "the data does not start with the signature PGCOPY\\n\\377\\r\\n\\0"
            )
        flags = _I4.unpack(self._take(4, "the flags"))[0] & 0xFFFFFFFF
        if flags & _OIDS_FLAG:
            raise self._framing("the flags ask for OIDs, which no table here has")
        if flags & _CRITICAL_FLAGS:
            raise self._framing(f"the flags {flags:#010x} set a critical bit this server lacks")
        extension = _I4.unpack(self._take(4, "the header extension's length"))[0]
        if extension < 0:
            raise self._framing(f"the header extension's length is {extension}")
        self._take(extension, "the header extension")

    def rows(self) -> Iterator[tuple[object, ...]]:
        self._header()
        placed = self._placed
        count = len(placed)
        kinds = [(at, c, *_DECODERS.get(c.type, (None, _text_decoder))) for at, c in placed]
        chunks = ChunkDecoder(self._width, placed)
        while True:
            rows, self._at = chunks.decode(self._buffer, self._at)
            self._tuple += len(rows)
            yield from rows
            # One tuple the exact way: across two reads of the data, the trailer, or wrong.
            self._tuple += 1
            fields = _I2.unpack(self._take(2, "a tuple's field count"))[0]
            if fields == -1:
                break
            if fields != count:
                raise self._framing(f"{fields} field(s) where {count} column(s) are copied")
            row: list[object] = [None] * self._width
            for number, (at, column, length, decode) in enumerate(kinds, start=1):
                size = _I4.unpack(self._take(4, "a field's length"))[0]
                if size == -1:
                    continue
                if size < 0 or length is not None and size != length:
                    kind = _TYPE_NAMES.get(column.type, column.type)
                    raise self._framing(
                        f"column {number} ({column.name}) is {size} bytes where {kind} takes"
                        f" {length}"
                        if size >= 0
                        else f"column {number} ({column.name}) has the length {size}"
                    )
                data = self._take(size, f"column {number} ({column.name})")
                try:
                    row[at] = decode(data)
                except (CopyError, UnicodeDecodeError) as exc:
                    why = exc.message if isinstance(exc, CopyError) else "not valid UTF-8"
                    raise CopyError(
                        f"COPY {self._table} (FORMAT binary), tuple {self._tuple}, column"
                        f" {number} ({column.name}): {why}"
                    ) from None
            yield tuple(row)
        if self._fill(1):
            self._tuple = 0
            raise self._framing("data follows the trailer")


def encode_binary(
    columns: Sequence[Column], rows: Iterable[Sequence[object]], rows_per_chunk: int = 1000
) -> Iterator[bytes]:
    """The rows as binary COPY data, `rows_per_chunk` rows a chunk: the header goes with the
    first row and the trailer after the last chunk's rows (one row a chunk: a chunk of its
    own, with the header when there is no row, as PostgreSQL sends them)."""
    encoders = [ENCODERS.get(c.type, _text_encoder) for c in columns]
    count = _I2.pack(len(columns))
    null = _I4.pack(-1)
    pack = _I4.pack
    parts: list[bytes] = [HEADER]
    for number, row in enumerate(rows, start=1):
        parts.append(count)
        for encode, value in zip(encoders, row, strict=True):
            if value is None:
                parts.append(null)
            else:
                data = encode(value)
                parts.append(pack(len(data)))
                parts.append(data)
        if number % rows_per_chunk == 0:
            yield b"".join(parts)
            parts = []
    parts.append(TRAILER)
    yield b"".join(parts)
