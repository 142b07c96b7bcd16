"""stream_transactions.transaction_events: a record's events are the same whichever way they
are made. A one-row upsert's record (a one-row INSERT's) is made without the `Record`,
`Entry` and `ChangeRun` objects; every other record goes the general way, and the two must
give the same transaction for any record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.features import stream_transactions
from refimpl.engine.features.event_cursor import EventShape, Links
from refimpl.engine.features.stream_transactions import _record_events, transaction_events
from refimpl.engine.storage import records, values
from refimpl.engine.storage.schema import TableSchema
from tests.engine.features.table_schemas import table_schemas

TABLES = {
    "plain": "CREATE TABLE plain (id BIGINT PRIMARY KEY, x DOUBLE, s TEXT)",
    "timed": "CREATE TABLE timed (id BIGINT PRIMARY KEY, ts TIMESTAMP, x DOUBLE)",
    "parted": "CREATE TABLE parted (ts TIMESTAMP, s SYMBOL, x DOUBLE, id INT PRIMARY KEY)"
    " TIMESERIES(ts) PARTITION BY DAY, SYMBOL(s)",
    "keyless": "CREATE TABLE keyless (ts TIMESTAMP, s SYMBOL, x DOUBLE) TIMESERIES(ts)",
    "kept": "CREATE TABLE kept (id BIGINT PRIMARY KEY, x DOUBLE) REPLICA IDENTITY FULL",
}
LINKS = Links(row=lambda database, table: f"/row?db={database}&table={table}&key=")


@pytest.fixture(scope="module")
def schemas() -> Iterator[dict[str, TableSchema]]:
    with table_schemas(TABLES) as made:
        yield made


def _value(column_type: str) -> st.SearchStrategy[Any]:
    if column_type == "DOUBLE":
        return st.floats(allow_nan=False) | st.none()
    if column_type in ("TEXT", "SYMBOL"):
        return st.text(max_size=4) | st.none()
    if column_type == "TIMESTAMP":
        return st.integers(0, values.TIMESTAMP_MAX)  # a time series' time is never NULL
    return st.integers(-(2**31), 2**31 - 1)


@st.composite
def _entry(draw: st.DrawFn, schemas: dict[str, TableSchema]) -> records.Entry:
    """An entry of a record: an upsert of one row or several, logged on the table's columns
    or on others (a record older than an ALTER), with or without row ids and before-images;
    or a delete, or an entry of a table that is gone."""
    name = draw(st.sampled_from([*sorted(schemas), "gone"]))
    schema = schemas.get(name, schemas["plain"])
    columns = list(schema.column_names)
    if draw(st.booleans()):  # logged in another order, with a column dropped since
        columns = [*draw(st.permutations(columns)), "dropped"]
    types = {c.name: c.type for c in schema.columns}
    types["dropped"] = "TEXT"
    row = st.tuples(*(_value(types[c]) for c in columns))
    if draw(st.integers(0, 4)) == 0:
        return records.Entry.delete(name, [((), (draw(st.integers(0, 99)),))])
    rows = draw(st.lists(row, min_size=1, max_size=3))
    rowids = draw(st.none() | st.lists(st.integers(0, 99), min_size=len(rows), max_size=len(rows)))
    none: list[tuple | None] = [None] * len(rows)  # inserts on a table with before-images
    old_rows = draw(st.none() | st.just(none))
    return records.Entry.upsert(name, columns, rows, rowids, old_rows)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_record_gives_the_general_ways_transaction(
    schemas: dict[str, TableSchema], data: st.DataObject
) -> None:
    entries = data.draw(st.lists(_entry(schemas), min_size=1, max_size=3))
    payload = records.encode(1_700_000_000_000_000, entries)
    shapes: dict[str, EventShape] = {}
    made = transaction_events("db", 7, payload, schemas.get, LINKS, shapes)
    general = _record_events("db", records.decode(7, payload), schemas.get, LINKS, shapes)
    assert made == general


def test_a_one_row_inserts_record_is_made_without_a_change_run(
    schemas: dict[str, TableSchema], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_run(*_: object) -> None:
        raise AssertionError("a one-row upsert's record made through entry_run")

    monkeypatch.setattr(stream_transactions, "entry_run", no_run)
    entry = records.Entry.upsert("plain", ["id", "x", "s"], [(5, 1.5, "a")], None)
    made = transaction_events("db", 9, records.encode(1, [entry]), schemas.get, LINKS)
    (item,) = made.items
    assert item.change is not None and item.change.row == [5, 1.5, "a"]
    assert (made.lsn, made.committed_at, item.kind) == (9, 1, "change")
    assert (
        b'"op":"upsert"' in item.data and item.data.endswith(b'"}') and made.size == len(item.data)
    )
