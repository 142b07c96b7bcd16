"""Rows converted before the write lock (`TypedRows`) insert exactly as the same rows
converted at the insert do, also when the types they were made for are not the table's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.storage import values
from refimpl.errors import KdbError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_text(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


TYPES = ("BIGINT", "DOUBLE", "TIMESTAMP", "SYMBOL", "BOOLEAN")
COLUMNS = ["id", "price", "ts", "s", "ok"]
CREATE = "CREATE TABLE t (id BIGINT, price DOUBLE, ts TIMESTAMP, s SYMBOL, ok BOOLEAN)"

fields = st.tuples(
    st.one_of(st.just(""), st.integers(-(2**63), 2**63 - 1).map(str)),
    st.one_of(st.just(""), st.floats(allow_nan=False, allow_infinity=False).map(repr)),
    st.one_of(st.just(""), st.integers(0, 4_000_000_000_000_000).map(iso_text)),
    st.one_of(st.just(""), st.sampled_from(["A", "B", "é"])),
    st.sampled_from(["", "true", "false"]),
)


def typed(row: tuple[str, ...], types: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(values.parse_text(f, k, c) for f, k, c in zip(row, types, COLUMNS, strict=True))


def inserted(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]] | str:
    """What a fresh table holds after inserting `rows`, or the error's message."""
    with TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder) / "data")
        try:
            session = instance.session("demo", ADMIN)
            session.execute(CREATE)
            try:
                session.insert_rows("t", COLUMNS, rows)
            except KdbError as error:
                return error.message
            return sorted(map(tuple, session.execute("SELECT * FROM t").rows), key=repr)
        finally:
            instance.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(fields, max_size=8), st.booleans())
def test_typed_rows_insert_as_converted_rows(rows: list[tuple[str, ...]], stale: bool) -> None:
    # Stale: made for another type of `id` than the table's (as if the table changed since
    # the parse), so the insert must convert them again and refuses text for a BIGINT.
    made_for = ("STRING", *TYPES[1:]) if stale else TYPES
    converted = [typed(row, made_for) for row in rows]
    assert inserted(values.TypedRows(made_for, converted)) == inserted(converted)
