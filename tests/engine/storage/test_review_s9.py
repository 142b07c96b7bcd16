"""Review of the bulk load merged while other writers commit (`bulk_merge`): properties the
reviewed code must keep.

Whatever the other writers do while a load merges (single puts, batches by `put_many`,
deletes, rows moved to another partition, keys of the load itself written and deleted
again), the table after the install reads exactly as the model: the writers' changes, then
the load's rows; or, when a key of the load is held at the install, the writers' changes
alone and the load refused. Blocks are tiny and the index shards from a few entries on, so
that a few dozen rows split, share and merge blocks and shards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import blocks, bulk, bulk_merge, ident_index, table, values
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.sql import ast
from refimpl.sql.parser import parse

DAY = 86_400_000_000
Row = tuple[Any, ...]
Ident = tuple[Any, ...]
SCHEMAS = {
    "by_day": "CREATE TABLE q (k BIGINT PRIMARY KEY, t TIMESTAMP, v BIGINT) TIMESERIES(t)"
    " PARTITION BY DAY",
    "by_key": "CREATE TABLE q (k BIGINT PRIMARY KEY, t TIMESTAMP, v BIGINT)",
}


@pytest.fixture(autouse=True)
def tiny(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(blocks, "BLOCK_ROWS", 8)
    monkeypatch.setattr(blocks, "_HALF", 4)
    monkeypatch.setattr(blocks, "_SMALL", 2)
    for module in (table, bulk, bulk_merge, ident_index):
        monkeypatch.setattr(module, "SHARD_AT", 12)
    yield


def _table(kind: str) -> Table:
    statement = parse(SCHEMAS[kind]).statements[0]
    assert isinstance(statement, ast.CreateTable)
    return Table(TableSchema.from_create(statement))


def _row(k: int, day: int, v: int) -> Row:
    return (k, day * DAY + k % 5, v)


def _reads(target: Table) -> dict[Ident, Row]:
    """The table as every way of reading it says, checked to agree."""
    by_ident = {ident: target.get(ident) for ident in target.index}
    scanned = sorted(target.scan())
    assert sorted(r for r in by_ident.values() if r is not None) == scanned
    assert len(target) == len(scanned)
    for partition in target.partitions.values():
        keys = list(partition.keys())
        assert keys == sorted(keys)
    return {(r[0],): r for r in scanned}


# The other writers' changes: ("put", k, day), ("delete", k, _), ("many", k, day): put_many
# of keys k, k + 1, k + 2. Keys 50 to 59 are the load's: a writer may take one and let it go.
writes = st.lists(
    st.tuples(st.sampled_from(["put", "delete", "many"]), st.integers(0, 59), st.integers(0, 3)),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(SCHEMAS)),
    first=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=30),
    loaded=st.lists(st.tuples(st.integers(50, 59), st.integers(0, 3)), min_size=1, max_size=10),
    meanwhile=writes,
)
@example(  # a key of the load put and deleted again while the load merges
    kind="by_day",
    first=[(k, 0) for k in range(12)],
    loaded=[(50, 1), (51, 1)],
    meanwhile=[("put", 50, 2), ("delete", 50, 0)],
)
def test_the_install_reads_as_the_writes_meanwhile_then_the_load(
    kind: str,
    first: list[tuple[int, int]],
    loaded: list[tuple[int, int]],
    meanwhile: list[tuple[str, int, int]],
) -> None:
    target = _table(kind)
    model: dict[Ident, Row] = {}
    for k, day in first:
        target.put((k,), _row(k, day, 0))
        model[(k,)] = _row(k, day, 0)
    rows = list({k: _row(k, day, 1) for k, day in loaded}.values())
    typed = values.TypedRows(("BIGINT", "TIMESTAMP", "BIGINT"), rows)
    load = bulk.prepare("q", target, typed, bulk.keys_of(target, typed))
    merge = bulk_merge.Merge(load)
    for number, (op, k, day) in enumerate(meanwhile):
        if op == "put":
            target.put((k,), _row(k, day, 100 + number))
            model[(k,)] = _row(k, day, 100 + number)
        elif op == "many":
            keys = [key for key in (k, k + 1, k + 2) if key < 60]
            batch = [_row(key, day, 100 + number) for key in keys]
            target.put_many([(key,) for key in keys], batch)
            model.update({(r[0],): r for r in batch})
        elif (k,) in model:
            target.delete((k,))
            del model[(k,)]
    assert merge.build()
    fits = merge.fits({"q": target})
    if any((r[0],) in model for r in rows):
        assert fits is False  # a writer holds a key of the load: refused, table untouched
        merge.end()
    else:
        assert fits is True
        merge.install()
        model.update({(r[0],): r for r in rows})
    assert not target.journals
    assert _reads(target) == model
    assert dict(target.index) == {i: target.place(r, i) for i, r in model.items()}
