"""A bulk load merged into a snapshot of its table while other writers change the table
(`bulk_merge`) leaves exactly the table of the writers' changes and then the load's rows,
against a model (a dict of identity -> row); a key of the load that the table holds, at the
snapshot or written meanwhile, refuses the load with the table unchanged.

Blocks are made tiny and the index shards from a few entries on, so that a few dozen rows
split, share and merge blocks and shards."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.storage import blocks, bulk, bulk_merge, ident_index, table, values
from refimpl.engine.storage.ident_index import OrderIndex, ShardedIndex
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.sql import ast
from refimpl.sql.parser import parse

DAY = 86_400_000_000
Row = tuple[Any, ...]
Ident = tuple[Any, ...]
SCHEMAS = {
    # keyed, partitioned by day, ordered by time then key
    "by_day": "CREATE TABLE q (k BIGINT PRIMARY KEY, t TIMESTAMP, v BIGINT) TIMESERIES(t)"
    " PARTITION BY DAY",
    # keyed, one partition ordered by key (its index a dict, or the partition: OrderIndex)
    "by_key": "CREATE TABLE q (k BIGINT PRIMARY KEY, t TIMESTAMP, v BIGINT)",
    # row ids, partitioned by day
    "rowids": "CREATE TABLE q (k BIGINT, t TIMESTAMP, v BIGINT) TIMESERIES(t) PARTITION BY DAY",
}


@pytest.fixture(autouse=True)
def tiny(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(blocks, "BLOCK_ROWS", 8)
    monkeypatch.setattr(blocks, "_HALF", 4)
    monkeypatch.setattr(blocks, "_SMALL", 2)
    for module in (table, bulk, bulk_merge, ident_index):
        monkeypatch.setattr(module, "SHARD_AT", 12)
    yield


def new_table(kind: str) -> Table:
    statement = parse(SCHEMAS[kind]).statements[0]
    assert isinstance(statement, ast.CreateTable)
    return Table(TableSchema.from_create(statement))


def row(k: int, day: int, v: int) -> Row:
    return (k, day * DAY + k % 5, v)


def prepared(target: Table, rows: list[Row]) -> bulk.PreparedLoad:
    typed = values.TypedRows(("BIGINT", "TIMESTAMP", "BIGINT"), rows)
    if target.keyed:
        idents = bulk.keys_of(target, typed)
    else:
        idents = bulk.rowid_idents(target.next_rowid, len(rows))
        target.next_rowid += len(rows)
    return bulk.prepare("q", target, typed, idents)


def check(target: Table, model: dict[Ident, Row]) -> None:
    """Every read of the table equals the model's."""
    assert len(target) == len(model)
    assert {ident: target.get(ident) for ident in model} == model
    assert sorted(target.scan()) == sorted(model.values())
    assert dict(target.index) == {i: target.place(r, i) for i, r in model.items()}
    by_part = [list(p.keys()) for p in target.partitions.values()]
    assert all(keys == sorted(keys) for keys in by_part)
    assert sum(map(len, by_part)) == len(model)


ops = st.lists(
    st.tuples(st.sampled_from(["put", "delete"]), st.integers(0, 60), st.integers(0, 3)),
    max_size=25,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(SCHEMAS)),
    order_index=st.booleans(),
    first=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3)), max_size=40),
    loaded=st.lists(st.tuples(st.integers(61, 120), st.integers(0, 3)), min_size=1, max_size=40),
    meanwhile=ops,
)
def test_a_merge_equals_the_writes_meanwhile_then_the_load(
    kind: str,
    order_index: bool,
    first: list[tuple[int, int]],
    loaded: list[tuple[int, int]],
    meanwhile: list[tuple[str, int, int]],
) -> None:
    target = new_table(kind)
    model: dict[Ident, Row] = {}
    firsts = list({k: row(k, day, 0) for k, day in first}.values())
    if order_index and kind == "by_key":  # as a checkpoint or a replay leaves it
        target.load_rows(firsts, None)
        assert isinstance(target.index, OrderIndex)
        model.update({(r[0],): r for r in firsts})
    else:
        for one in firsts:
            ident: Ident = (one[0],) if target.keyed else (target.allocate_rowid(),)
            target.put(ident, one)
            model[ident] = one
    rows = list({k: row(k, day, 1) for k, day in loaded}.values())
    load = prepared(target, rows)
    merge = bulk_merge.Merge(load)
    held = list(model)
    for number, (op, k, day) in enumerate(meanwhile):  # the table's writers, meanwhile
        if op == "put":
            ident = (k,)
            if not target.keyed:
                ident = held[k % len(held)] if held and k % 2 else (target.allocate_rowid(),)
            new = row(k, day, 100 + number)
            target.put(ident, new)
            model[ident] = new
        elif model:
            ident = sorted(model)[k % len(model)]
            target.delete(ident)
            del model[ident]
    assert merge.build()
    assert merge.fits({"q": target})
    merge.install()
    assert not target.journals
    if target.keyed:
        model.update({(r[0],): r for r in rows})
    else:
        model.update(zip(sorted(load.index), rows, strict=True))
    check(target, model)


def test_a_key_held_at_the_snapshot_or_written_meanwhile_refuses_the_load() -> None:
    for kind in ("by_day", "by_key"):
        target = new_table(kind)
        for k in range(20):
            target.put((k,), row(k, 0, 0))
        before = sorted(target.scan())
        merge = bulk_merge.Merge(prepared(target, [row(30, 1, 1), row(5, 2, 1)]))
        assert not merge.build()  # key 5 is held
        merge.end()
        assert not target.journals and sorted(target.scan()) == before
        merge = bulk_merge.Merge(prepared(target, [row(30, 1, 1), row(31, 2, 1)]))
        target.put((31,), row(31, 3, 7))  # a writer takes a key of the load meanwhile
        assert merge.build()
        assert merge.fits({"q": target}) is False
        merge.end()
        assert target.get((31,)) == row(31, 3, 7) and len(target) == 21


def test_a_write_the_journal_cannot_replay_makes_the_merge_stale() -> None:
    target = new_table("by_day")
    for k in range(20):
        target.put((k,), row(k, k % 3, 0))
    merge = bulk_merge.Merge(prepared(target, [row(30, 1, 1)]))
    target.drop_partitions([(1,)] if (1,) in target.partitions else list(target.partitions)[:1])
    assert merge.build()
    assert merge.fits({"q": target}) is None
    assert merge.fits({"q": new_table("by_day")}) is False  # the table was replaced


def test_a_big_index_is_sharded_and_reads_as_a_dict() -> None:
    target = new_table("by_day")
    for k in range(11):
        target.put((k,), row(k, 0, 0))
    assert type(target.index) is dict
    target.put((11,), row(11, 1, 0))
    index = target.index
    assert isinstance(index, ShardedIndex) and len(index) == 12
    twin = target.clone()
    target.delete((3,))
    target.put((40,), row(40, 2, 0))
    assert (
        (3,) not in index and (40,) in index and index[(40,)] == target.place(row(40, 2, 0), (40,))
    )
    assert (3,) in twin.index and (40,) not in twin.index  # the twin's shards were copied
    assert sorted(i[0] for i in index) == sorted(set(range(12)) - {3} | {40})
    assert index.pop((99,)) is None and [1] not in index  # unhashable: not held


def test_a_load_merges_while_another_session_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the database: commits made by another thread while the load merges are in
    the table after it, with the load's rows; the log replays to the same table."""
    create = SCHEMAS["by_day"]
    instance = Instance.open(tmp_path / "data")
    build = bulk_merge.Merge.build

    def build_while_writing(merge: bulk_merge.Merge) -> bool:
        def write() -> None:
            with closing(instance.session()) as other:
                other.execute(f"INSERT INTO q VALUES (500, {DAY + 3}, 5)", ())
                other.execute("UPDATE q SET v = 9, t = t + 86400000000 WHERE k = 2", ())
                other.execute("DELETE FROM q WHERE k = 4", ())

        writer = threading.Thread(target=write)
        writer.start()
        writer.join()  # done before the merge is made: its changes are the journal's
        return build(merge)

    monkeypatch.setattr(bulk_merge.Merge, "build", build_while_writing)
    with closing(instance.session()) as session:
        session.execute(create, ())
        for k in range(10):
            session.execute(f"INSERT INTO q VALUES ({k}, {k % 3 * DAY + k}, 0)", ())
        rows = [row(k, k % 4, 1) for k in range(100, 140)]
        loaded = session.database.load_rows(
            "q", values.TypedRows(("BIGINT", "TIMESTAMP", "BIGINT"), rows)
        )
        assert loaded is not None
        session.database.wait_durable(loaded[1])
        after = sorted(session.execute("SELECT k, t, v FROM q", ()).rows)
    instance.close()
    expected = {k: (k, k % 3 * DAY + k, 0) for k in range(10)}
    expected[500] = (500, DAY + 3, 5)
    expected[2] = (2, 2 * DAY + 2 + DAY, 9)
    del expected[4]
    expected.update({r[0]: r for r in rows})
    assert after == sorted(expected.values())
    monkeypatch.setattr(bulk_merge.Merge, "build", build)
    reopened = Instance.open(tmp_path / "data")
    with closing(reopened.session()) as session:
        assert sorted(session.execute("SELECT k, t, v FROM q", ()).rows) == after
    reopened.close()


def reads_every_way(target: Table) -> dict[Ident, Row]:
    """The table as every way of reading it says, checked to agree."""
    by_ident = {ident: target.get(ident) for ident in target.index}
    scanned = sorted(target.scan())
    assert sorted(r for r in by_ident.values() if r is not None) == scanned
    assert len(target) == len(scanned)
    for partition in target.partitions.values():
        keys = list(partition.keys())
        assert keys == sorted(keys)
    return {(r[0],): r for r in scanned}


# Whatever the other writers do while a load merges (single puts, batches by `put_many`,
# deletes, rows moved to another partition, keys of the load itself written and deleted
# again), the table after the install reads exactly as the model: the writers' changes, then
# the load's rows; or, when a key of the load is held at the install, the writers' changes
# alone and the load refused.
# The other writers' changes: ("put", k, day), ("delete", k, _), ("many", k, day): put_many
# of keys k, k + 1, k + 2. Keys 50 to 59 are the load's: a writer may take one and let it go.
writes = st.lists(
    st.tuples(st.sampled_from(["put", "delete", "many"]), st.integers(0, 59), st.integers(0, 3)),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["by_day", "by_key"]),  # keyed: the writers put and delete by key
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
    target = new_table(kind)
    model: dict[Ident, Row] = {}
    for k, day in first:
        target.put((k,), row(k, day, 0))
        model[(k,)] = row(k, day, 0)
    rows = list({k: row(k, day, 1) for k, day in loaded}.values())
    typed = values.TypedRows(("BIGINT", "TIMESTAMP", "BIGINT"), rows)
    load = bulk.prepare("q", target, typed, bulk.keys_of(target, typed))
    merge = bulk_merge.Merge(load)
    for number, (op, k, day) in enumerate(meanwhile):
        if op == "put":
            target.put((k,), row(k, day, 100 + number))
            model[(k,)] = row(k, day, 100 + number)
        elif op == "many":
            keys = [key for key in (k, k + 1, k + 2) if key < 60]
            batch = [row(key, day, 100 + number) for key in keys]
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
    assert reads_every_way(target) == model
    assert dict(target.index) == {i: target.place(r, i) for i, r in model.items()}
