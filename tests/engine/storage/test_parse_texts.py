"""A column of texts converted by C calls (`values.parse_texts`, an import's fast way) gives
exactly what `parse_text` gives each text, or None, and None whenever `parse_text` refuses one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import values
from refimpl.errors import SqlError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TYPES = ("INT", "BIGINT", "OID", "DOUBLE", "TIMESTAMP", "SYMBOL", "STRING", "BOOLEAN")


def stamp(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Texts near what each type takes and refuses: numbers at and past the ranges, spaces,
# underscores, signs, other digits, NaN and infinities, stamps with and without a zone, a
# lower-case z, offsets, a date alone, and noise.
texts = st.one_of(
    st.just(""),
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["2147483648", "-2147483649", "4294967296", "-1", "0", "١٢", "1_000"]),
    st.floats().map(repr),
    st.sampled_from(["nan", "inf", "-Infinity", "1e400", " 1.5 ", "1.5x", "true", "F"]),
    st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999).map(stamp),
    st.sampled_from(
        [
            "2026-01-05T00:00:00Z",
            "2026-01-05T00:00:00z",
            " 2026-01-05T00:00:00Z",
            "2026-01-05T00:00:00Z ",
            "2026-01-05T00:00:00+01:00",
            "2026-01-05T00:00:00",
            "2026-01-05",
            "2026-01-05Z",
            "2026-01-05 00:00:00.5Z",
            "0001-01-01T00:00:00+00:01Z",
            "9999-12-31T23:59:59.999999Z",
            "Z",
            "+00:00Z",
        ]
    ),
    st.text(max_size=12),
)


def one_by_one(column: list[str], kind: str) -> list[object] | None:
    try:
        return [values.parse_text(text, kind, "c") for text in column]
    except SqlError:
        return None


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(TYPES), st.lists(texts, min_size=1, max_size=6))
def test_a_column_is_parse_texts_values_or_left_to_it(kind: str, column: list[str]) -> None:
    fast = values.parse_texts(tuple(column), kind)
    slow = one_by_one(column, kind)
    if slow is None:
        assert fast is None  # a refused text is always left to parse_text, which says why
    elif fast is not None:
        assert fast == slow
        assert [type(value) for value in fast] == [type(value) for value in slow]


@pytest.mark.parametrize(
    ("kind", "column", "expected"),
    [
        ("BIGINT", ("1", "-5", " 7 "), [1, -5, 7]),
        ("DOUBLE", ("1.5", "2"), [1.5, 2.0]),
        ("TIMESTAMP", ("1970-01-01T00:00:01.5Z",), [1_500_000]),
        ("SYMBOL", ("a", "", "b"), ["a", None, "b"]),
    ],
)
def test_the_usual_columns_take_the_fast_way(
    kind: str, column: tuple[str, ...], expected: list[object]
) -> None:
    assert values.parse_texts(column, kind) == expected
