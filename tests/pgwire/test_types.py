"""Every column type's text and binary encodings read back as the same value (the way a
client sends a value it was sent), over each type's whole range."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.storage import values
from refimpl.errors import InvalidValue
from refimpl.pgwire import types

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

VALUES = {
    "INT": st.integers(values.INT_MIN, values.INT_MAX),
    "BIGINT": st.integers(values.BIGINT_MIN, values.BIGINT_MAX),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    "STRING": st.text(st.characters(exclude_categories=["Cs"])),
    "BOOLEAN": st.booleans(),
    "TIMESTAMP": st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX),
}


def as_param(value: object, column_type: str) -> object:
    """What the engine is given for a stored value read back as a parameter."""
    if column_type == "TIMESTAMP":
        return _EPOCH + timedelta(microseconds=value)  # type: ignore[arg-type]
    return value


@given(st.sampled_from(sorted(VALUES)).flatmap(lambda t: st.tuples(st.just(t), VALUES[t])))
def test_encodings_read_back(case):
    column_type, value = case
    pg = types.pg_type(column_type)
    for binary, encode in ((False, pg.text), (True, pg.binary)):
        back = types.decode_param(encode(value), pg.oid, binary, None, 1)
        assert back == as_param(value, column_type), (column_type, binary, encode(value))


def test_a_timestamp_is_written_as_postgresql_writes_it():
    micros = values.parse_timestamp("2026-09-24T10:00:00.5Z")
    assert types.timestamp_text(micros) == "2026-09-24 10:00:00.5+00"
    assert types.timestamp_text(values.parse_timestamp("2026-09-24")) == "2026-09-24 00:00:00+00"


@given(st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX))
def test_a_timestamp_text_is_datetimes_iso_text_with_its_zeros_cut(micros):
    iso = (datetime(1970, 1, 1) + timedelta(microseconds=micros)).isoformat(" ")
    expected = (iso.rstrip("0") if "." in iso else iso) + "+00"
    assert types.timestamp_text(micros) == expected


def test_special_doubles_are_written_as_postgresql_writes_them():
    encode = types.pg_type("DOUBLE").text
    assert [encode(v) for v in (float("nan"), float("inf"), -float("inf"), 2.0, 0.5)] == [
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"2",
        b"0.5",
    ]


def _one_by_one(decoders: types.ParamDecoders, data: list[bytes | None]) -> object:
    """What each parameter's decoder alone gives for `data`: the values, or the first error."""
    try:
        return tuple(None if v is None else f(v) for v, f in zip(data, decoders.each, strict=True))
    except InvalidValue as error:
        return ("error", str(error))


def _read(decoders: types.ParamDecoders, data: list[bytes | None]) -> object:
    try:
        return decoders.read(data)
    except InvalidValue as error:
        return ("error", str(error))


# Bytes that decide what a number's text reads as: digits (ASCII and others), signs, points,
# exponents, underscores, spaces of both kinds, words, and bytes of no UTF-8.
_NUMBERISH = st.lists(
    st.sampled_from(
        ["1", "0", "9", "-", "+", ".", "e", "_", " ", "\t", "\x1c", "\u00a0", "\u0663", "x"]
        + ["inf", "nan", "Infinity", "0x1", "é"]
    ),
    max_size=8,
).map(lambda parts: "".join(parts).encode())
_PARAM_BYTES = st.one_of(
    st.none(),
    _NUMBERISH,
    st.binary(max_size=9),
    st.sampled_from([2, 4, 8]).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    st.text(max_size=6).map(str.encode),
)
_KINDS = ["INT", "BIGINT", "DOUBLE", "STRING", "SYMBOL", "BOOLEAN", "TIMESTAMP", None]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.sampled_from([0, 25, 701, 20, 21, 23, 26, 700, 16, 1184]),
            _PARAM_BYTES,
            st.sampled_from([0, 1]),  # text or binary
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_binds_values_read_as_each_decoder_reads_them(params):
    """Read at once (in C where every value allows it), a Bind's values, text or binary,
    are what each parameter's decoder gives, and a bad one is refused with the same error."""
    oids = [oid for _, oid, _, _ in params]
    hints = {n: kind for n, (kind, _, _, _) in enumerate(params, 1) if kind is not None}
    codes = [code for _, _, _, code in params]
    decoders = types.ParamDecoders(oids, hints, codes, len(params))
    data = [value for _, _, value, _ in params]
    expected = _one_by_one(decoders, data)
    got = _read(decoders, data)
    assert got == expected or (repr(got) == repr(expected)), (params, got, expected)
    assert isinstance(got, tuple) and isinstance(expected, tuple)  # values, or an error's
    assert [type(v) for v in got] == [type(v) for v in expected]


def test_a_bind_of_unicode_digits_reads_them_as_before():
    decoders = types.ParamDecoders([20, 701], {}, (), 2)
    assert decoders.read(["\u0663".encode(), b" 1_5 "]) == (3, 15.0)
    with pytest.raises(InvalidValue, match=r"parameter \$2 is not a valid DOUBLE"):
        decoders.read([b"1", b"1.5x"])


def test_a_bind_of_binary_numbers_and_text_reads_them():
    decoders = types.ParamDecoders([20, 701, 25], {}, (1, 1, 0), 3)
    data = [(7).to_bytes(8, "big"), struct.pack("!d", 0.5), b"x"]
    assert decoders.read(data) == (7, 0.5, "x")
    with pytest.raises(InvalidValue, match=r"parameter \$1 is not a valid BIGINT"):
        decoders.read([b"\0" * 4, data[1], data[2]])
