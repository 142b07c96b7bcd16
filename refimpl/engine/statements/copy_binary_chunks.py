"""Binary COPY tuples decoded a buffer at a time (`ChunkDecoder`), the way most data goes.

A COPY's column types are known before its first tuple, so the decoder writes, once per
COPY, a loop for exactly those types and compiles it: per tuple, one `struct` call reads the
field count, the lengths and the values of the fixed-width fields up to the next
variable-length field and that field's length; a slice reads the text; TIMESTAMPs are
moved to the Unix epoch and range-checked and DOUBLEs checked finite where they are read;
the row is built in the table's column order. The generated source holds only numbers and
the names below (no column name, no data), so what is compiled depends on nothing a client
can write but its column types.

A tuple the loop does not expect (a NULL in a fixed-width column) is read a field at a time
(`_by_fields`) and the loop goes on after it. The decoder stops before the first tuple it
cannot read whole: one cut short by the end of the buffer, the trailer, or one that breaks a
framing rule or holds a value its type cannot hold. `BinaryRowReader` reads that one the
exact way, which names what is wrong (the tuple and the column).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.errors import CopyError

# 2000-01-01 UTC, the zero of PostgreSQL's binary timestamps, in microseconds since 1970.
PG_EPOCH_MICROS = 946_684_800_000_000
# Fixed-width column types: their `struct` code and field length. Any other type is text.
FIXED: dict[str, tuple[str, int]] = {
    "INT": ("i", 4),
    "BIGINT": ("q", 8),
    "DOUBLE": ("d", 8),
    "BOOLEAN": ("?", 1),  # any byte but 0 is true, as PostgreSQL reads it
    "TIMESTAMP": ("q", 8),
}
# The range of a binary timestamp field's own value (microseconds since 2000).
_RAW_LOW = values.TIMESTAMP_MIN - PG_EPOCH_MICROS
_RAW_HIGH = values.TIMESTAMP_MAX - PG_EPOCH_MICROS
_I2, _I4 = struct.Struct("!h"), struct.Struct("!i")

Row = tuple[Any, ...]
# decode(buf, at, end, append) -> where the first tuple it did not append starts
Loop = Callable[[bytes, int, int, Callable[[Row], None]], int]


def timestamp_checked(raw: int) -> int:
    """A binary timestamp's value in microseconds since 1970; CopyError past the range."""
    micros = raw + PG_EPOCH_MICROS
    if not values.TIMESTAMP_MIN <= micros <= values.TIMESTAMP_MAX:
        raise CopyError("the timestamp is outside years 1 to 9999")
    return micros


def double_checked(number: float) -> float:
    """`number` when finite; CopyError otherwise (no column holds an infinity or NaN)."""
    if not math.isfinite(number):
        raise CopyError(f"{number} is out of range for DOUBLE (finite numbers)")
    return number


class _Irregular(Exception):
    """A tuple the decoder leaves to the exact way (which names what is wrong)."""


def _loop_source(
    types: Sequence[str], places: Sequence[int], width: int, nulls: frozenset[int]
) -> tuple[str, list[str]]:
    """The source of the tuple loop for fields of `types` going to `places` of a row
    `width` wide, the fixed-width fields `nulls` NULL, and the `struct` formats it unpacks
    (`unpack0`, `unpack1`, ...)."""
    body: list[str] = []
    formats: list[str] = []
    value: dict[int, str] = {}  # field -> its expression in the row

    def segment(fields: list[int], variable: int | None) -> None:
        n = len(formats)
        codes = ["!h" if n == 0 else "!"]
        tests = [f"f{n}[0] != {len(types)}"] if n == 0 else []
        item = 1 if n == 0 else 0  # where the next field's length is unpacked (after the count)
        for i in fields:
            if i in nulls:  # a NULL is its length, -1, alone
                codes.append("i")
                tests.append(f"f{n}[{item}] != -1")
                value[i] = "None"
                item += 1
                continue
            code, length = FIXED[types[i]]
            codes.append("i" + code)
            tests.append(f"f{n}[{item}] != {length}")
            value[i] = f"f{n}[{item + 1}]"
            item += 2
        formats.append("".join(codes) + ("i" if variable is not None else ""))
        size = struct.calcsize(formats[-1])
        if n:
            body.append(f"if pos + {size} > end: return at")
        body.append(f"f{n} = unpack{n}(buf, pos)")
        if tests:
            body.append(f"if {' or '.join(tests)}: return at")
        body.append(f"pos += {size}")
        for i in fields:
            if i in nulls:
                continue
            if types[i] == "TIMESTAMP":
                body.append(f"v{i} = {value[i]}")
                body.append(f"if not {_RAW_LOW} <= v{i} <= {_RAW_HIGH}: return at")
                value[i] = f"v{i} + {PG_EPOCH_MICROS}"
            elif types[i] == "DOUBLE":
                # x - x is 0.0 for every finite x, NaN for an infinity or a NaN: no call.
                body.append(f"v{i} = {value[i]}")
                body.append(f"if v{i} - v{i} != 0.0: return at")
                value[i] = f"v{i}"
        if variable is not None:
            body.extend(
                [
                    f"n = f{n}[-1]",
                    "if n < 0:",
                    "    if n != -1: return at",
                    f"    v{variable} = None",
                    "else:",
                    "    stop = pos + n",
                    "    if stop > end: return at",
                    f"    v{variable} = buf[pos:stop].decode('utf-8')",
                    "    pos = stop",
                ]
            )
            value[variable] = f"v{variable}"

    fixed: list[int] = []
    for i, kind in enumerate(types):
        if kind in FIXED:
            fixed.append(i)
        else:
            segment(fixed, i)
            fixed = []
    if fixed or not formats:
        segment(fixed, None)
    cells = ["None"] * width
    for i, place in enumerate(places):
        cells[place] = value[i]
    body += [f"append(({''.join(cell + ', ' for cell in cells)}))", "at = pos"]
    head = struct.calcsize(formats[0])
    lines = [
        "def loop(buf, at, end, append):",
        "    try:",
        f"        while at + {head} <= end:",
        "            pos = at",
        *("            " + line for line in body),
        "    except UnicodeDecodeError:",
        "        pass",
        "    return at",
    ]
    return "\n".join(lines), formats


def compile_loop(
    types: Sequence[str], places: Sequence[int], width: int, nulls: frozenset[int] = frozenset()
) -> Loop:
    """The tuple loop for these column types, the fixed-width fields `nulls` NULL (see the
    module's docstring)."""
    source, formats = _loop_source(types, places, width, nulls)
    scope: dict[str, Any] = {
        f"unpack{n}": struct.Struct(f).unpack_from for n, f in enumerate(formats)
    }
    exec(compile(source, "<binary COPY tuple loop>", "exec"), scope)  # noqa: S102 - see above
    loop: Loop = scope["loop"]
    return loop


class ChunkDecoder:
    """Decodes whole tuples of binary COPY data for `placed` columns (place in the table's
    row, column) of a table `width` columns wide: rows in the table's column order, NULL
    where the statement names no column, values checked as the exact way checks them.

    A loop expects one pattern of NULLs in the fixed-width columns (none, at first); a tuple
    of another is read by fields, and a run of them by the loop for their pattern (compiled
    once, up to `PATTERNS` of them a COPY), so that a column of mostly NULLs goes as fast."""

    PATTERNS = 8

    def __init__(self, width: int, placed: Sequence[tuple[int, Column]]) -> None:
        self._types = [column.type for _, column in placed]
        self._places = [place for place, _ in placed]
        self._width = width
        self._fields = [
            (place, kind, struct.Struct("!" + FIXED[kind][0]) if kind in FIXED else None)
            for place, kind in zip(self._places, self._types, strict=True)
        ]
        self._loop = compile_loop(self._types, self._places, width)
        self._loops: dict[frozenset[int], Loop] = {frozenset(): self._loop}

    def _loop_for(self, nulls: frozenset[int]) -> Loop | None:
        loop = self._loops.get(nulls)
        if loop is None and len(self._loops) < self.PATTERNS:
            loop = compile_loop(self._types, self._places, self._width, nulls)
            self._loops[nulls] = loop
        return loop

    def decode(self, buf: bytes, at: int) -> tuple[list[Row], int]:
        """The rows of the whole tuples of `buf` from `at` on, and where the first tuple it
        leaves to the exact way starts."""
        rows: list[Row] = []
        append = rows.append
        end = len(buf)
        last: frozenset[int] | None = None  # the pattern of the tuple just read by fields
        while True:
            start = at
            at = self._loop(buf, at, end, append)
            if at != start:
                last = None
            try:
                row, at, nulls = self._by_fields(buf, at, end)
            except (_Irregular, UnicodeDecodeError):
                return rows, at
            append(row)
            # Two tuples in a row of one other pattern: a run of them, which its own loop
            # reads faster; a lone one (a NULL here and there) is not worth the switch.
            if nulls == last:
                self._loop = self._loop_for(nulls) or self._loop
            last = nulls

    def _by_fields(self, buf: bytes, at: int, end: int) -> tuple[Row, int, frozenset[int]]:
        """One tuple read a field at a time, where it starts and which of its fixed-width
        fields are NULL; _Irregular for one the exact way must read."""
        if at + 2 > end or _I2.unpack_from(buf, at)[0] != len(self._fields):
            raise _Irregular
        pos = at + 2
        row: list[Any] = [None] * self._width
        nulls: list[int] = []
        for field, (place, kind, layout) in enumerate(self._fields):
            if pos + 4 > end:
                raise _Irregular
            size = _I4.unpack_from(buf, pos)[0]
            pos += 4
            if size == -1:
                if layout is not None:
                    nulls.append(field)
                continue
            if size < 0 or pos + size > end:
                raise _Irregular
            if layout is None:
                row[place] = buf[pos : pos + size].decode("utf-8")
            elif size != layout.size:
                raise _Irregular
            else:
                item = layout.unpack_from(buf, pos)[0]
                if kind == "TIMESTAMP":
                    if not _RAW_LOW <= item <= _RAW_HIGH:
                        raise _Irregular
                    item += PG_EPOCH_MICROS
                elif kind == "DOUBLE" and not math.isfinite(item):
                    raise _Irregular
                row[place] = item
            pos += size
        return tuple(row), pos, frozenset(nulls)
