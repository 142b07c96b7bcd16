"""Type OIDs and the text and binary encodings of every column type this database has.

| column type | PostgreSQL type (OID)  | text            | binary                            |
|-------------|------------------------|-----------------|-----------------------------------|
| INT         | int4 (23)              | decimal         | 4-byte big-endian                 |
| BIGINT      | int8 (20)              | decimal         | 8-byte big-endian                 |
| DOUBLE      | float8 (701)           | shortest exact  | IEEE 754, big-endian              |
| STRING      | text (25)              | UTF-8           | UTF-8                             |
| SYMBOL      | text (25)              | UTF-8           | UTF-8                             |
| BOOLEAN     | bool (16)              | t / f           | one byte 1 / 0                    |
| TIMESTAMP   | timestamptz (1184)     | ISO, UTC (+00)  | microseconds since 2000-01-01 UTC |
| OID         | oid (26)               | decimal         | 4-byte big-endian, unsigned       |

STRING and SYMBOL are both text: the protocol cannot tell them apart (spec/pgwire.md). OID
is the catalog's (no table has it); its arrays are oid[] (1028).
Parameters arrive in either format with the OID the client named, or 0 (unspecified), in
which case the type the statement gives the parameter decides (`decode_param`).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from operator import call
from typing import Any, cast

from refimpl.engine.query.arrays import VECTORS as ENGINE_VECTOR_ELEMENTS
from refimpl.engine.query.arrays import elements
from refimpl.engine.result import Column
from refimpl.engine.storage.values import (
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    format_timestamp,
    parse_timestamp,
)
from refimpl.errors import InvalidValue, ProtocolError
from refimpl.pgwire import messages as m
from refimpl.pgwire.row_writers import RowsWriter, rows_writer

BOOL, INT8, INT2, INT4, TEXT, OID = 16, 20, 21, 23, 25, 26
FLOAT4, FLOAT8, UNKNOWN, VARCHAR, BPCHAR, NAME = 700, 701, 705, 1043, 1042, 19
TIMESTAMP, TIMESTAMPTZ, NUMERIC, CHAR, REGCLASS = 1114, 1184, 1700, 18, 2205

# 2000-01-01 UTC, the zero of PostgreSQL's binary timestamps, in microseconds since 1970.
PG_EPOCH_MICROS = 946_684_800_000_000
_INFINITY = 2**63 - 1  # a binary timestamp of 'infinity'; its negation less one, '-infinity'
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_I2, _I4, _I8 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_U4 = struct.Struct("!I")
_F4, _F8 = struct.Struct("!f"), struct.Struct("!d")
_EPOCH_DATE = date(1970, 1, 1)
_MICROS_PER_DAY = 86_400_000_000


_SPECIAL_FLOATS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _float_text(value: float) -> str:
    # repr is the shortest text that reads back the same double, as PostgreSQL 12+ writes;
    # one repr and a look at its last character: this runs for every value of a result.
    text = repr(value)
    if text.endswith(".0"):
        return text[:-2]
    return _SPECIAL_FLOATS.get(text, text) if text[-1] in "nf" else text


@functools.lru_cache(maxsize=4096)
def _day_text(day: int) -> str:
    """`2026-09-24` of a day number since 1970-01-01 (rows of a result share few days)."""
    return (_EPOCH_DATE + timedelta(days=day)).isoformat()


# The texts of a day's 1,440 minutes (" 09:15:") and of a minute's 60 seconds, made once:
# looking two up is about half the cost of formatting three numbers per value.
_MINUTE_TEXT = tuple(f" {h:02d}:{m:02d}:" for h in range(24) for m in range(60))
_SECOND_TEXT = tuple(f"{s:02d}" for s in range(60))


def timestamp_text(micros: int) -> str:
    """`2026-09-24 10:00:00.5+00`: PostgreSQL's ISO output of a timestamptz in UTC."""
    if not TIMESTAMP_MIN <= micros <= TIMESTAMP_MAX:
        iso = format_timestamp(micros)[:-1].replace("T", " ", 1)
        head, _, fraction = iso.partition(".")
        fraction = fraction.rstrip("0")
        return f"{head}.{fraction}+00" if fraction else f"{head}+00"
    # Arithmetic and a cached date, not a datetime per value: the text of every timestamp
    # of a result is made here, and this is most of what a wide SELECT costs the server.
    day, in_day = divmod(micros, _MICROS_PER_DAY)
    seconds, micro = divmod(in_day, 1_000_000)
    clock = _day_text(day) + _MINUTE_TEXT[seconds // 60] + _SECOND_TEXT[seconds % 60]
    if micro:
        return f"{clock}.{micro:06d}".rstrip("0") + "+00"
    return clock + "+00"


@dataclass(frozen=True, slots=True)
class PgType:
    oid: int
    name: str
    size: int  # bytes, -1 for variable length
    # Of a SQL value of the column's type (int, float, str, bool, ...).
    text: Callable[[Any], bytes]
    binary: Callable[[Any], bytes]


def _utf8(value: object) -> bytes:
    return str(value).encode("utf-8")


def _int_out(value: int) -> bytes:
    return b"%d" % value


def _double_out(value: float) -> bytes:
    return _float_text(value).encode()


def _bool_out(value: object) -> bytes:
    return b"t" if value else b"f"


# The text encoders a rows writer writes out in its lines (`row_writers.rows_writer`'s
# `inline`): an expression of the value `{v}` giving the same bytes as the encoder `{e}`,
# which it may call for the rare values (a double's NaN and infinities).
INLINE_TEXT: dict[Callable[[Any], bytes], str] = {
    _int_out: "b'%d' % {v}",
    _utf8: "str({v}).encode('utf-8')",
    _bool_out: "(b't' if {v} else b'f')",
    _double_out: "(t[:-2].encode() if (t := repr({v})).endswith('.0')"
    " else t.encode() if t[-1] not in 'nf' else {e}({v}))",
}

_TEXT = PgType(TEXT, "text", -1, _utf8, _utf8)
COLUMN_TYPES: dict[str, PgType] = {
    "INT": PgType(INT4, "integer", 4, _int_out, _I4.pack),
    "BIGINT": PgType(INT8, "bigint", 8, _int_out, _I8.pack),
    "DOUBLE": PgType(FLOAT8, "double precision", 8, _double_out, lambda v: _F8.pack(v)),
    "STRING": _TEXT,
    "SYMBOL": _TEXT,
    "BOOLEAN": PgType(BOOL, "boolean", 1, _bool_out, lambda v: b"\x01" if v else b"\x00"),
    "TIMESTAMP": PgType(TIMESTAMPTZ, "timestamp with time zone", 8,
                        lambda v: timestamp_text(v).encode(),
                        lambda v: _I8.pack(v - PG_EPOCH_MICROS)),
    "OID": PgType(OID, "oid", 4, _int_out, _U4.pack),
}  # fmt: skip
# PostgreSQL's types of values a column type holds but does not say (`Column.pg_type`):
# `name` (the session's names) is text's bytes; a `timestamp` (LOCALTIMESTAMP, whose zone
# is the session's UTC) is timestamptz's binary, and its text without the `+00`.
PG_ONLY_TYPES: dict[str, PgType] = {
    "name": PgType(NAME, "name", 64, _utf8, _utf8),
    "timestamp": PgType(TIMESTAMP, "timestamp without time zone", 8,
                        lambda v: timestamp_text(v)[:-3].encode(),
                        COLUMN_TYPES["TIMESTAMP"].binary),
}  # fmt: skip


# Arrays (`T[]`, what array_agg answers) and the catalog's vectors: each element in its
# type's encoding. PostgreSQL's OIDs: int4[] 1007, int8[] 1016, float8[] 1022, text[] 1009,
# bool[] 1000, timestamptz[] 1185, oid[] 1028 (also a parameter `$1::oid[]`, asyncpg's
# catalog queries'); int2vector 22 (of int2, 21), oidvector 30 (of oid, 26).
_ARRAY_OIDS = {"INT": 1007, "BIGINT": 1016, "DOUBLE": 1022, "STRING": 1009, "SYMBOL": 1009,
               "BOOLEAN": 1000, "TIMESTAMP": 1185, "OID": 1028}  # fmt: skip
_VECTORS = {"INT2VECTOR": (22, "int2vector", INT2, _I2.pack),
            "OIDVECTOR": (30, "oidvector", OID, _U4.pack)}  # fmt: skip


def _array_type(element: str, oid: int, name: str, first: int, of: tuple | None = None) -> PgType:
    """An array of `element` values kept as PostgreSQL's text of it (`{a,b}`, or a vector's
    `4 5`): sent as PostgreSQL writes the array (each element in its type's text, quoted
    where needed), or in its binary format (one dimension from subscript `first`)."""
    base = COLUMN_TYPES[element]
    element_oid, binary = base.oid, base.binary
    if of is not None:  # a vector's elements: int2 or oid
        element_oid, binary = of

    def values(value: object) -> list[Any]:
        return elements(str(value), element)[0]  # text as it is: '' is no NULL in an array

    def text(value: object) -> bytes:
        if first == 0:
            return str(value).encode()
        words = [None if item is None else base.text(item).decode() for item in values(value)]
        return _array_text(words).encode()

    def binary_array(value: object) -> bytes:
        items = values(value)
        if not items:
            return _I4.pack(0) + _I4.pack(0) + _I4.pack(element_oid)
        parts = [struct.pack("!iiiii", 1, None in items, element_oid, len(items), first)]
        for item in items:
            data = None if item is None else binary(item)
            parts.append(_I4.pack(-1) if data is None else _I4.pack(len(data)) + data)
        return b"".join(parts)

    return PgType(oid, name, -1, text, binary_array)


def _array_text(words: Sequence[str | None]) -> str:
    """PostgreSQL's text of a one-dimensional array of elements' texts (None: NULL)."""
    out = []
    for word in words:
        if word is None:
            word = "NULL"
        elif not word or word.upper() == "NULL" or set(word) & _QUOTED:
            word = '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(word)
    return "{" + ",".join(out) + "}"


_QUOTED = frozenset('{}," \\')
COLUMN_TYPES.update(
    {
        f"{t}[]": _array_type(t, oid, f"{COLUMN_TYPES[t].name}[]", 1)
        for t, oid in _ARRAY_OIDS.items()
    }
)
COLUMN_TYPES.update(
    {
        t: _array_type(ENGINE_VECTOR_ELEMENTS[t], oid, name, 0, (element, pack))
        for t, (oid, name, element, pack) in _VECTORS.items()
    }
)
# The parameter types that are arrays (a parameter's value is then the array's text).
ARRAY_TYPES = frozenset(f"{t}[]" for t in _ARRAY_OIDS)
_ARRAY_PARAM_OIDS = frozenset(_ARRAY_OIDS.values())
# The engine type a parameter of a given OID stands for, when the client names one.
ENGINE_TYPE_OF_OID = {
    BOOL: "BOOLEAN", INT2: "INT", INT4: "INT", INT8: "BIGINT", OID: "BIGINT",
    FLOAT4: "DOUBLE", FLOAT8: "DOUBLE", NUMERIC: "DOUBLE", TEXT: "STRING", VARCHAR: "STRING",
    BPCHAR: "STRING", NAME: "STRING", CHAR: "STRING", TIMESTAMP: "TIMESTAMP",
    TIMESTAMPTZ: "TIMESTAMP",
}  # fmt: skip


# The column types' (upper case) and `Column.pg_type`s' (lower case) alike.
_WIRE_TYPES = COLUMN_TYPES | PG_ONLY_TYPES


def pg_type(column_type: str) -> PgType:
    """The PostgreSQL type of a column type, or of a `Column.pg_type` (text for NULL-only
    and unknown columns)."""
    return _WIRE_TYPES.get(column_type, _TEXT)


def column_pg_type(column: Column) -> PgType:
    """The PostgreSQL type a result column is sent as: its `pg_type`'s, else its type's."""
    return pg_type(column.pg_type or column.type)


def oid_of(column_type: str | None) -> int:
    """A parameter's OID for ParameterDescription: its type, or text when none is known."""
    return pg_type(column_type).oid if column_type else TEXT


def formats(codes: Sequence[int], count: int) -> list[int]:
    """The format of each of `count` values from a Bind's codes: none (all text), one (all
    alike) or one a value; ProtocolError for any other count."""
    if not codes:
        return [0] * count
    if len(codes) == 1:
        return [codes[0]] * count
    if len(codes) != count:
        raise ProtocolError(f"{len(codes)} format codes were sent for {count} values")
    return list(codes)


def encoders(column_types: list[str], formats: list[int]) -> list[Callable[[object], bytes]]:
    """One encoder a column, text or binary as `formats` (one code per column) asks."""
    return [
        pg_type(t).binary if f == 1 else pg_type(t).text
        for t, f in zip(column_types, formats, strict=True)
    ]


def row_description(columns: list[Column], formats: list[int]) -> m.RowDescription:
    """The RowDescription of `columns` sent in `formats`."""
    fields = []
    for column, fmt in zip(columns, formats, strict=True):
        pg = column_pg_type(column)
        name = column.pg_name or column.name
        fields.append(
            m.FieldDescription(name, pg.oid, pg.size, fmt, type_modifier=column.pg_typmod)
        )
    return m.RowDescription(tuple(fields))


@dataclass(frozen=True, slots=True)
class RowShape:
    """How rows of some columns in some formats are sent, worked out once: their
    RowDescription and each column's encoder (no type dispatch per value)."""

    columns: list[Column]
    formats: list[int]
    description: m.RowDescription
    encoders: tuple[Callable[[object], bytes], ...]
    write: RowsWriter

    @classmethod
    def of(cls, columns: list[Column], formats: list[int]) -> RowShape:
        column_encoders = tuple(encoders([c.pg_type or c.type for c in columns], formats))
        return cls(
            columns,
            formats,
            row_description(columns, formats),
            column_encoders,
            rows_writer(column_encoders, [INLINE_TEXT.get(e) for e in column_encoders]),
        )

    def fits(self, columns: list[Column], formats: list[int]) -> bool:
        # A plan answers the same list of columns each run: identity first, cheaply.
        return (self.columns is columns or self.columns == columns) and self.formats == formats

    def data_rows(self, rows: Sequence[Sequence[object]]) -> m.DataRows:
        return m.DataRows(rows, self.encoders, self.write)


def kept_shape(kept: RowShape | None, columns: list[Column], formats: list[int]) -> RowShape:
    """`kept` when it is the shape of `columns` in `formats` (a kept plan answers the same
    list each run: one identity test), else theirs, worked out anew."""
    if kept is not None and kept.fits(columns, formats):
        return kept
    return RowShape.of(columns, formats)


# --- parameters ---------------------------------------------------------------------------


def _bool_text(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("t", "true", "y", "yes", "on", "1"):
        return True
    if lowered in ("f", "false", "n", "no", "off", "0"):
        return False
    raise ValueError(text)


def _timestamp_value(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


class _Infinite(ValueError):
    """A binary timestamp of PostgreSQL's 'infinity' or '-infinity'."""


def _binary_timestamp(data: bytes) -> datetime:
    since_2000 = _I8.unpack(data)[0]
    if since_2000 in (_INFINITY, -_INFINITY - 1):
        # PostgreSQL's 'infinity' and '-infinity' (asyncpg sends datetime.max and .min so).
        raise _Infinite("infinity, which no TIMESTAMP holds (years 1 to 9999)")
    return _timestamp_value(since_2000 + PG_EPOCH_MICROS)


def _double_text(text: str) -> float:
    # A float even for `2`: a Describe's dry run stands 0.0 in for a DOUBLE parameter, so
    # `$1 * 2` answers the DOUBLE column it was described with for `2` as for `2.5`.
    return float(text.strip())


_FROM_TEXT: dict[str, Callable[[str], object]] = {
    "BOOLEAN": _bool_text,
    "INT": lambda t: int(t.strip()),
    "BIGINT": lambda t: int(t.strip()),
    "DOUBLE": _double_text,
    "STRING": lambda t: t,
    "SYMBOL": lambda t: t,
    "TIMESTAMP": lambda t: _timestamp_value(parse_timestamp(t)),
}
_FROM_BINARY: dict[int, Callable[[bytes], object]] = {
    BOOL: lambda b: b != b"\x00",
    INT2: lambda b: _I2.unpack(b)[0],
    INT4: lambda b: _I4.unpack(b)[0],
    OID: lambda b: _U4.unpack(b)[0],
    INT8: lambda b: _I8.unpack(b)[0],
    FLOAT4: lambda b: _F4.unpack(b)[0],
    FLOAT8: lambda b: _F8.unpack(b)[0],
    TIMESTAMP: _binary_timestamp,
    TIMESTAMPTZ: _binary_timestamp,
}
_TEXT_OIDS = frozenset({TEXT, VARCHAR, BPCHAR, NAME, CHAR, UNKNOWN, 0})


def _binary_array_text(data: bytes) -> str:
    """The text (`{1,2}`) of an array parameter sent in PostgreSQL's binary array format:
    one dimension (or none, the empty array) of elements of a type `_FROM_BINARY` reads."""
    dims, _, element_oid = struct.unpack_from("!iiI", data)
    if dims == 0:
        return "{}"
    if dims != 1:
        raise ValueError(f"an array of {dims} dimensions; send a one-dimensional array")
    count = _I4.unpack_from(data, 12)[0]
    offset, words = 20, list[str | None]()
    for _ in range(count):
        size = _I4.unpack_from(data, offset)[0]
        offset += 4
        if size < 0:
            words.append(None)
            continue
        item = data[offset : offset + size]
        offset += size
        if element_oid in _TEXT_OIDS:
            words.append(item.decode("utf-8"))
            continue
        decoder = _FROM_BINARY.get(element_oid)
        if decoder is None:
            raise ValueError(f"elements of type OID {element_oid}; send the array as text")
        value = decoder(item)
        words.append(("t" if value else "f") if isinstance(value, bool) else str(value))
    return _array_text(words)


def decode_param(data: bytes, oid: int, binary: bool, hint: str | None, number: int) -> object:
    """Parameter `$number` as a Python value the engine takes (TIMESTAMP as a datetime).

    `oid` is what the client named (0: nothing); `hint` the column type the statement gives
    the parameter, used when the client named none. InvalidValue when the bytes do not
    read as the type.
    """
    return param_decoder(oid, binary, hint, number)(data)


def param_decoder(
    oid: int, binary: bool, hint: str | None, number: int
) -> Callable[[bytes], object]:
    """`decode_param` with all but the bytes chosen once (a prepared statement's Bind keeps
    one a parameter): the same values, the same errors."""
    oid = _named_oid(oid, hint)
    kind = ENGINE_TYPE_OF_OID.get(oid)
    convert: Callable[[bytes], object]
    if oid in _ARRAY_PARAM_OIDS:
        convert = _binary_array_text if binary else _text_of
    elif binary and oid not in _TEXT_OIDS:
        found = _FROM_BINARY.get(oid)
        if found is None:
            message = (
                f"parameter ${number} is in the binary format of type OID {oid}, which"
                " this server does not read; send it as text"
            )

            def refuse(data: bytes) -> object:
                raise InvalidValue(message)

            return refuse
        convert = found
    elif kind:
        from_text = _FROM_TEXT[kind]

        def convert(data: bytes) -> object:
            return from_text(data.decode("utf-8"))
    else:
        convert = _text_of

    def decode(data: bytes) -> object:
        try:
            return convert(data)
        except (ValueError, struct.error, UnicodeDecodeError, OverflowError) as exc:
            why = f" ({exc.args[0]})" if isinstance(exc, _Infinite) else ""
            raise InvalidValue(
                f"parameter ${number} is not a valid {kind or 'value'}{why}: {data[:40]!r}"
            ) from None

    return decode


def _named_oid(oid: int, hint: str | None) -> int:
    """The OID a parameter is read as: the client's, else the type it was told in
    ParameterDescription (`hint`, the column type the statement gives it)."""
    if oid in (0, UNKNOWN) and hint is not None:
        return pg_type(hint).oid
    return oid


# What `param_decoder` reads of the text of these engine types (and of text, its UTF-8)
# is what these C calls give, where they give anything: `int` and `float` of bytes take
# ASCII alone, which the decoder's text reads alike.
_QUICK_FROM_TEXT: dict[str, Callable[[bytes], object]] = {
    "INT": int,
    "BIGINT": int,
    "DOUBLE": float,
    "STRING": bytes.decode,
    "SYMBOL": bytes.decode,
}
# The binary numbers `_FROM_BINARY` reads: its structs' unpack, whose 1-tuple holds the value.
_QUICK_FROM_BINARY: dict[int, Callable[[bytes], tuple[Any, ...]]] = {
    INT2: _I2.unpack,
    INT4: _I4.unpack,
    OID: _U4.unpack,
    INT8: _I8.unpack,
    FLOAT4: _F4.unpack,
    FLOAT8: _F8.unpack,
}


def _quick_decoder(
    oid: int, binary: bool, hint: str | None
) -> tuple[Callable[[bytes], object], bool] | None:
    """A C call giving the value `param_decoder(oid, binary, hint, n)` gives for every bytes
    it does not refuse with ValueError or struct.error (in a 1-tuple: True with it), or None
    for the types that have none."""
    oid = _named_oid(oid, hint)
    if oid in _ARRAY_PARAM_OIDS:
        return None
    if binary and oid not in _TEXT_OIDS:
        unpack = _QUICK_FROM_BINARY.get(oid)
        return None if unpack is None else (unpack, True)
    kind = ENGINE_TYPE_OF_OID.get(oid)
    found = _QUICK_FROM_TEXT.get(kind) if kind else bytes.decode
    return None if found is None else (found, False)


class ParamDecoders:
    """The decoders of a Bind's parameters, one a parameter (`param_decoder`'s), chosen once
    for a prepared statement's Bind of some format codes."""

    __slots__ = ("each", "_quick", "_unpacked")

    def __init__(
        self, oids: Sequence[int], hints: dict[int, str], codes: Sequence[int], count: int
    ) -> None:
        """`count` parameters, $n of OID `oids[n - 1]` (0 past them), of the column type
        `hints.get(n)` and in the format `codes` give it (`formats`: ProtocolError for a
        wrong count of codes)."""
        self.each: list[Callable[[bytes], object]] = []
        quick: list[Callable[[bytes], object]] = []
        unpacked: list[int] = []
        for n, code in enumerate(formats(codes, count), 1):
            oid, hint = oids[n - 1] if n <= len(oids) else 0, hints.get(n)
            self.each.append(param_decoder(oid, code == 1, hint, n))
            if (found := _quick_decoder(oid, code == 1, hint)) is not None:
                quick.append(found[0])
                if found[1]:
                    unpacked.append(n - 1)
        # Tried first on values of no NULL when every parameter has one; the places of
        # those it gives in a 1-tuple.
        self._quick = tuple(quick) if len(quick) == count else None
        self._unpacked = tuple(unpacked)

    def read(self, values: Sequence[bytes | None]) -> tuple[object, ...]:
        """The values decoded (None stays NULL): InvalidValue for the first that does not
        read as its type."""
        each = self.each
        if len(values) == 1:  # a point read's key, mostly: its decoder alone costs least
            value = values[0]
            return (None if value is None else each[0](value),)
        quick = self._quick
        if quick is not None and None not in values:
            try:
                read: list[Any] = list(map(call, quick, cast(Sequence[bytes], values)))  # in C
            except (ValueError, struct.error):
                pass  # the decoders say what is wrong (or read what C does not: '٣')
            else:
                for n in self._unpacked:  # a binary number, in its struct's 1-tuple
                    read[n] = read[n][0]
                return tuple(read)
        return tuple([None if v is None else f(v) for v, f in zip(values, each, strict=True)])


def _text_of(data: bytes) -> str:
    return data.decode("utf-8")
