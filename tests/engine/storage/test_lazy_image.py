"""A table loaded from a checkpoint image keeps its chunks encoded and decodes a block when
something first touches it: every read and write on an untouched or half-touched table
must equal a model's, and touch only the blocks it needs.

Blocks and chunks are made tiny so that a few dozen rows make many of each; the table is
keyed by its identity alone (the layout that loads lazily), with a key or with row ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import blocks, checkpoint, ddl, table_image
from refimpl.engine.storage.blocks import _EncodedBlock
from refimpl.engine.storage.memory_limit import rows_bytes, table_bytes, text_positions
from refimpl.engine.storage.table import OrderIndex, Table
from refimpl.sql import ast
from refimpl.sql.parser import parse
from tests.hypothesis_settings import OVER_FIXTURE

Row = tuple[Any, ...]
Ident = tuple[Any, ...]

SCHEMAS = {
    "keyed": "CREATE TABLE q (k INT PRIMARY KEY, s STRING, v INT)",
    "rowids": "CREATE TABLE q (k INT, s STRING, v INT)",
    "pair": "CREATE TABLE q (k INT, s STRING, v INT, PRIMARY KEY (k, v))",
}

keys = st.integers(0, 60)
values = st.integers(0, 3)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("put"), keys, values),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("put_many"), st.lists(keys, unique=True, max_size=12), values),
        st.tuples(st.just("rows_of"), st.lists(keys, max_size=6, unique=True)),
        st.tuples(st.just("scan")),
        st.tuples(st.just("count")),
        st.tuples(st.just("image")),
        st.tuples(st.just("clone")),
    ),
    max_size=20,
)


def new_table(kind: str) -> Table:
    statement = parse(SCHEMAS[kind]).statements[0]
    assert isinstance(statement, ast.CreateTable)
    return ddl.create_table(statement)


def make_row(k: int, v: int) -> Row:
    return (k, None if v == 0 else "ab" * v, v % 2)


def ident_of(kind: str, row: Row) -> Ident:
    return (row[0], row[2]) if kind == "pair" else (row[0],)


def reloaded(table: Table, kind: str) -> Table:
    """A new table loaded from a checkpoint image of `table` as it is now."""
    image = table_image.TakenTable.of(table).image()
    fresh = new_table(kind)
    fresh.next_rowid = image.next_rowid
    assert fresh.load_image(image) is False  # kept encoded
    assert isinstance(fresh.index, OrderIndex)
    held = fresh.partitions.get(())
    assert held is None or all(isinstance(b, _EncodedBlock) and b.encoded for b in held._blocks)
    return fresh


def encoded(table: Table) -> int:
    held = table.partitions.get(())
    return (
        0 if held is None else sum(isinstance(b, _EncodedBlock) and b.encoded for b in held._blocks)
    )


@pytest.fixture
def tiny() -> Iterator[None]:
    saved = blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS
    blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS = 8, 4, 2, 3
    try:
        yield
    finally:
        blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS = saved


@settings(OVER_FIXTURE, max_examples=150)
@given(
    kind=st.sampled_from(sorted(SCHEMAS)),
    first=st.lists(st.tuples(keys, values), max_size=40),
    steps=operations,
)
def test_an_encoded_image_reads_and_writes_as_its_model_touching_only_what_it_needs(
    tiny: None, kind: str, first: list[tuple[int, int]], steps: list[tuple[Any, ...]]
) -> None:
    table = new_table(kind)
    model: dict[Ident, Row] = {}
    for k, v in first:
        row = make_row(k, v)
        table.put(ident_of(kind, row), row)
        model[ident_of(kind, row)] = row
    table = reloaded(table, kind)
    scans: list[tuple[Iterator[Row], list[Row]]] = []
    twins: list[tuple[Table, list[Row]]] = []

    def ordered() -> list[Row]:
        return [model[ident] for ident in sorted(model)]

    for step in steps:
        before = encoded(table)
        match step:
            case ("get", k):
                for ident in {ident for ident in model if ident[0] == k} | {(k,)}:
                    assert table.get(ident) == model.get(ident)
                    assert (ident in table.index) == (ident in model)
                if kind != "pair":
                    assert before - encoded(table) <= 1
            case ("put", k, v):
                row = make_row(k, v)
                ident = ident_of(kind, row)
                assert table.put(ident, row) == model.get(ident)
                model[ident] = row
                assert before - encoded(table) <= 3
            case ("delete", k):
                gone = [ident for ident in model if ident[0] == k][:1] or [(k,)]
                assert table.delete(gone[0]) == model.pop(gone[0], None)
                assert before - encoded(table) <= 3
            case ("put_many", ks, v):
                rows = {ident_of(kind, r): r for r in (make_row(k, v) for k in ks)}
                table.put_many(list(rows), list(rows.values()))
                model.update(rows)
            case ("rows_of", ks):
                wanted = [(k,) for k in ks] if kind != "pair" else [(k, 1) for k in ks]
                assert table.rows_of(wanted) == [
                    model[i] for i in sorted(set(wanted)) if i in model
                ]
            case ("scan",):
                scans.append((table.scan(), ordered()))  # read only at the end
            case ("count",):
                assert len(table) == len(model)
                assert encoded(table) == before  # counting decodes nothing
                assert table_bytes(table) == rows_bytes(ordered(), table.schema)
                assert encoded(table) == before
            case ("image",):
                twins.append((table, ordered()))
                table = reloaded(table, kind)  # an image of a half-touched table
            case ("clone",):
                twins.append((table, ordered()))
                table = table.clone()
    assert list(table.scan()) == ordered()
    assert len(table) == len(model)
    assert dict(table.index) == {ident: ((), ident) for ident in model}
    positions = text_positions(table.schema)
    assert table.text_length(positions) == sum(len(r[1]) for r in model.values() if r[1])
    if kind == "rowids" and model:
        assert table.next_rowid > max(model)[0]
    for taken, then in scans:
        assert list(taken) == then
    for twin, its_rows in twins:
        assert list(twin.scan()) == its_rows


def test_an_identity_of_another_type_or_null_is_not_held(tiny: None) -> None:
    """As a dict's lookup says: the partition compares keys, and NULL or a text compares
    with no integer."""
    table = new_table("keyed")
    for k in range(10):
        table.put((k,), make_row(k, 1))
    table = reloaded(table, "keyed")
    for ident in [(None,), ("3",), (3, "x", None)]:
        assert table.get(ident) is None and ident not in table.index
        assert table.delete(ident) is None
    assert table.rows_of([(None,), ("x",), (4,)]) == [make_row(4, 1)]
    assert len(table) == 10
