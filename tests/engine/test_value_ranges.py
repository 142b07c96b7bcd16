"""Every type's range, kept at every way in; stored values out of range still shown."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.query.functions import cast_value
from refimpl.engine.storage import values
from refimpl.errors import InvalidValue


def test_timestamp_range_is_the_four_digit_years():
    assert values.format_timestamp(values.TIMESTAMP_MIN) == "0001-01-01T00:00:00.000Z"
    assert values.format_timestamp(values.TIMESTAMP_MAX) == "9999-12-31T23:59:59.999999Z"
    assert values.parse_timestamp("0001-01-01T00:00:00Z") == values.TIMESTAMP_MIN
    assert values.parse_timestamp("9999-12-31T23:59:59.999999Z") == values.TIMESTAMP_MAX
    for text in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"):
        with pytest.raises(InvalidValue, match="out of range for TIMESTAMP"):
            values.parse_timestamp(text)


@pytest.mark.parametrize(
    ("value", "type_"),
    [
        (values.TIMESTAMP_MAX + 1, "TIMESTAMP"),
        (9_000_000_000_000 * 1_000_000, "TIMESTAMP"),
        (values.INT_MAX + 1, "INT"),
        (values.BIGINT_MIN - 1, "BIGINT"),
        (2**64 + 1, "BIGINT"),
        (2**64 + 1, "DOUBLE"),
        (float("inf"), "DOUBLE"),
        (float("nan"), "DOUBLE"),
    ],
)
def test_coerce_refuses_out_of_range(value: object, type_: str):
    with pytest.raises(InvalidValue, match="out of range"):
        values.coerce(value, type_, "c")


@pytest.mark.parametrize(
    ("text", "type_"),
    [
        ("nan", "DOUBLE"),
        ("inf", "DOUBLE"),
        ("1e400", "DOUBLE"),
        ("9" * 5000, "BIGINT"),
        ("2147483648", "INT"),
        ("10000-01-01", "TIMESTAMP"),
    ],
)
def test_parse_text_refuses_out_of_range(text: str, type_: str):
    with pytest.raises(InvalidValue):
        values.parse_text(text, type_, "c")


@pytest.mark.parametrize(
    ("value", "source", "target"),
    [
        ("inf", "STRING", "DOUBLE"),
        (10**30, "BIGINT", "TIMESTAMP"),
        (1e300, "DOUBLE", "TIMESTAMP"),
        ("9" * 5000, "STRING", "INT"),
        (2**40, "BIGINT", "INT"),
    ],
)
def test_cast_refuses_out_of_range(value: object, source: str, target: str):
    with pytest.raises(InvalidValue):
        cast_value(value, source, target)


@given(st.integers(min_value=-(10**20), max_value=10**20))
def test_any_stored_timestamp_can_be_shown(micros: int):
    text = values.format_timestamp(micros)
    assert text.endswith("Z")
    if values.TIMESTAMP_MIN <= micros <= values.TIMESTAMP_MAX:
        assert values.parse_timestamp(text) == micros
        fraction = text[text.index(".") + 1 : -1]  # milliseconds unless micros are needed
        assert len(fraction) == (3 if micros % 1000 == 0 else 6)
        assert len(text) == len("0001-01-01T00:00:00Z") + 1 + len(fraction)
    else:
        assert text[0] in "+-"


def test_civil_from_days_agrees_with_datetime():
    for micros in range(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX, 86_400_000_000 * 997):
        moment = values.timestamp_to_datetime(micros)
        days = micros // 86_400_000_000
        assert values.civil_from_days(days) == (moment.year, moment.month, moment.day)
