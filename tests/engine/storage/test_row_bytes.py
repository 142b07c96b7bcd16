"""`memory_limit.row_bytes`, what a one-row INSERT's commit counts, is what `rows_bytes`
counts of that one row, for any columns, values (NULLs and empty texts included) and count
of secondary indexes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.storage.memory_limit import INDEX_ENTRY, row_bytes, rows_bytes
from refimpl.engine.storage.schema import TableSchema
from refimpl.sql import ast

# Each column type and values of it.
VALUES = {
    "INT": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "TIMESTAMP": st.integers(0, 2**62),
    "DOUBLE": st.floats(allow_nan=False),
    "BOOLEAN": st.booleans(),
    "STRING": st.text(max_size=20),
    "SYMBOL": st.text(max_size=8),
}


@st.composite
def schemas_and_rows(draw: st.DrawFn) -> tuple[TableSchema, tuple[object, ...]]:
    types = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=6))
    columns = tuple(ast.ColumnDef(f"c{n}", kind) for n, kind in enumerate(types))
    row = tuple(draw(st.none() | VALUES[kind]) for kind in types)
    return TableSchema("t", columns), row


@given(schemas_and_rows(), st.integers(0, 3))
def test_one_rows_count_is_the_count_of_a_list_of_it(made, indexes):
    schema, row = made
    assert row_bytes(row, schema, indexes) == rows_bytes([row], schema, indexes)


@given(schemas_and_rows(), st.lists(st.integers(0, 3), min_size=2, max_size=4))
def test_one_schemas_count_follows_its_count_of_indexes(made, counts):
    # One schema object counted with several counts of indexes in turn (an index made or
    # dropped keeps the schema): each count is its own, whatever was counted before.
    schema, row = made
    for indexes in counts:
        assert row_bytes(row, schema, indexes) == rows_bytes([row], schema, indexes)
        assert row_bytes(row, schema, indexes) - row_bytes(row, schema, 0) == (
            indexes * INDEX_ENTRY
        )
