"""Every column type's text and binary encodings read back as the same value (the way a
client sends a value it was sent), over each type's whole range."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.storage import values
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
