"""EventShape: a change's `row` object shows each value as a JSON answer does.

The one rule is `values.to_json` (a TIMESTAMP as its text, a float that is not finite as
null); the shape may show a row of other columns by its values as they are, but the JSON a
stream sends must be the rule's, byte for byte, for any row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from refimpl.engine.features.change_stream import UNLOGGED, Change
from refimpl.engine.features.event_cursor import EventShape, row_key
from refimpl.engine.storage import values
from refimpl.engine.storage.schema import TableSchema
from tests.engine.features.table_schemas import table_schemas

TABLES = {
    "plain": "CREATE TABLE plain (id BIGINT PRIMARY KEY, x DOUBLE, n INT, s TEXT, b BOOLEAN)",
    "timed": "CREATE TABLE timed (id BIGINT PRIMARY KEY, ts TIMESTAMP, x DOUBLE, s TEXT)",
    "parted": "CREATE TABLE parted (ts TIMESTAMP, s SYMBOL, x DOUBLE, id INT PRIMARY KEY)"
    " TIMESERIES(ts) PARTITION BY DAY, SYMBOL(s)",
    "keyless": "CREATE TABLE keyless (ts TIMESTAMP, s SYMBOL, x DOUBLE) TIMESERIES(ts)",
}


@pytest.fixture(scope="module")
def schemas() -> Iterator[dict[str, TableSchema]]:
    with table_schemas(TABLES) as made:
        yield made


def _value(column_type: str) -> st.SearchStrategy[Any]:
    if column_type == "DOUBLE":
        return st.floats(allow_nan=True, allow_infinity=True) | st.none()
    if column_type in ("TEXT", "SYMBOL"):
        return st.text(max_size=8) | st.none()
    if column_type == "BOOLEAN":
        return st.booleans() | st.none()
    if column_type == "TIMESTAMP":
        return st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX) | st.none()
    return st.integers(-(2**31), 2**31 - 1) | st.none()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), table=st.sampled_from(sorted(TABLES)))
def test_a_row_is_shown_by_the_json_rule(
    schemas: dict[str, TableSchema], data: st.DataObject, table: str
) -> None:
    schema = schemas[table]
    row = tuple(data.draw(_value(c.type)) for c in schema.columns)
    change = Change(1, 0, 0, "upsert", None, row, UNLOGGED)
    shown = EventShape("db", schema).data(change, "00")
    assert shown is not None
    expected = {c.name: values.to_json(v, c.type) for c, v in zip(schema.columns, row, strict=True)}
    assert msgspec.json.encode(shown["row"]) == msgspec.json.encode(expected)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), table=st.sampled_from(sorted(TABLES)), rowid=st.integers(0, 2**40))
def test_a_rows_key_is_its_partition_and_identity(
    schemas: dict[str, TableSchema], data: st.DataObject, table: str, rowid: int
) -> None:
    """`key_of` gives the key `row_key` makes (spec: changes, the key of a delete)."""
    schema = schemas[table]
    row = tuple(data.draw(_value(c.type)) for c in schema.columns)
    if table in ("parted", "keyless"):
        assume(row[0] is not None)  # a time series' rows have their time
    positions = schema.layout().key_positions
    ident = tuple(row[p] for p in positions) if positions else (rowid,)
    assert EventShape("db", schema).key_of(row, rowid) == row_key(schema, row, ident)
