"""A partition's `Blocks` reads as the SortedDict it replaced, through any writes, and a scan
taken from it (or a table) gives the rows of its moment whatever is written afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from refimpl.engine.storage import blocks
from refimpl.engine.storage.blocks import Blocks
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table
from refimpl.sql import ast
from refimpl.sql.parser import parse


@contextmanager
def small_blocks() -> Iterator[None]:
    """Blocks of at most 8 keys, so that a few dozen writes split, join and copy them."""
    saved = blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL
    blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL = 8, 4, 2
    try:
        yield
    finally:
        blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL = saved


def check_reads(got: Blocks, model: SortedDict, probes: list[tuple[int]]) -> None:
    """Every read a table or a feature makes of a partition answers as the model's."""
    keys = list(model.keys())
    assert list(got) == keys and len(got) == len(model) and bool(got) == bool(model)
    assert list(got.values()) == list(model.values())
    assert list(got.items()) == list(model.items())
    assert list(got.detached()) == list(model.values())
    assert got.text_length([0]) == sum(len(row[0]) for row in model.values())
    assert got.rows_for(keys[1::3]) == [model[key] for key in keys[1::3]]
    assert got.keys()[1:4] == keys[1:4] and got.keys()[-3:] == keys[-3:]
    if keys:
        assert got.keys()[-1] == keys[-1] and got.keys()[0] == keys[0]
    for probe in probes:
        assert (probe in got) == (probe in model)
        assert got.get(probe) == model.get(probe)
        if probe in model:
            assert got[probe] == model[probe]
        else:  # a key deleted may still be in a dict that blocks borrow
            with pytest.raises(KeyError):
                got[probe]
        assert got.bisect_right(probe) == model.bisect_right(probe)
        for low, high in ((probe, None), (None, probe), (probe, (probe[0] + 7,))):
            inclusive = (True, False)
            assert list(got.irange(low, high, inclusive)) == list(
                model.irange(low, high, inclusive)
            )
            assert list(got.detached(low, high)) == [
                model[k] for k in model.irange(low, high, inclusive)
            ]


keys = st.integers(0, 60).map(lambda k: (k,))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys),
        st.tuples(st.just("pop"), keys),
        st.tuples(st.just("update"), st.lists(keys, max_size=40)),
        st.tuples(st.just("append"), st.integers(1, 20)),
        st.tuples(st.just("scan"), st.none()),
        st.tuples(st.just("copy"), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(keys, max_size=40), operations)
def test_blocks_read_as_a_sorted_dict_and_scans_keep_their_moment(
    first: list[tuple[int]], steps: list[tuple[str, Any]]
) -> None:
    with small_blocks():
        model = SortedDict({k: ("first", k[0]) for k in first})
        got = Blocks.from_dict(dict(model))
        scans: list[tuple[Iterator[Any], list[Any]]] = []  # taken, the rows of its moment
        twins: list[tuple[Blocks, SortedDict]] = []
        for number, (kind, arg) in enumerate(steps):
            if kind == "set":
                got[arg] = model[arg] = ("set", number)
            elif kind == "pop":
                if arg in model:
                    assert got.pop(arg) == model.pop(arg)
                else:
                    with pytest.raises(KeyError):
                        got.pop(arg)
            elif kind == "update":
                batch = {k: ("update", number) for k in arg}
                got.update(batch)
                model.update(batch)
            elif kind == "append":  # keys past every held one: added as blocks of their own
                top = model.keys()[-1][0] + 1 if model else 0
                batch = SortedDict({(top + i,): ("append", number) for i in range(arg)})
                model.update(batch)
                got.update(batch)
            elif kind == "scan":
                scans.append((got.detached(), list(model.values())))
            else:
                twin = got.copy()
                twins.append((twin, SortedDict(model)))
                twin[(1000 + number,)] = ("twin", number)  # the twin's writes are its own
                twins[-1][1][(1000 + number,)] = ("twin", number)
        check_reads(got, model, [(k,) for k in range(-1, 62)])
        for taken, then in scans:
            assert list(taken) == then
        for twin, its_model in twins:
            assert list(twin.items()) == list(its_model.items())


def test_an_ascending_batch_is_added_as_blocks_of_its_own_and_others_go_in_by_key() -> None:
    partition = Blocks()
    for k in range(10_000):
        partition[(k,)] = (k, "")
    held = list(partition._blocks)
    after = {(k,): (k, "after") for k in range(20_000, 20_000 + blocks._HALF * 2 + 5)}
    partition.update(after)
    assert partition._blocks[: len(held)] == held  # the blocks held are not touched
    added = partition._blocks[len(held) :]
    assert [len(block.keys) for block in added] == [blocks._HALF, blocks._HALF, 5]
    assert all(block.rows is after for block in added)  # the batch's dict, taken over
    among = {(k,): (k, "among") for k in range(5_000, 5_000 + blocks._HALF * 2)}
    partition.update(among)  # falls among held keys: a key at a time, into held blocks
    assert all(block.rows is not among for block in partition._blocks)
    expected = {(k,): (k, "") for k in range(10_000)} | after | among
    assert list(partition.items()) == sorted(expected.items())
    assert partition.text_length([1]) == len("after") * len(after) + len("among") * len(among)


TABLE = "(k INT PRIMARY KEY, t TIMESTAMP, v INT) TIMESERIES(t) PARTITION BY DAY"
DAY = 86_400_000_000


def new_table() -> Table:
    statement = parse(f"CREATE TABLE q {TABLE}").statements[0]
    assert isinstance(statement, ast.CreateTable)
    return Table(TableSchema.from_create(statement))


writes = st.lists(
    st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 3)),  # (delete?, k, day)
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=60), writes)
def test_a_scan_sees_none_of_a_later_commit_and_a_scan_after_it_all_of_it(
    before: list[tuple[int, int]], commit: list[tuple[bool, int, int]]
) -> None:
    """A table's scan (whole, by partitions, by time range) taken before a commit's writes
    gives exactly the rows before them, though read after; one taken after gives every one
    of the writes."""
    with small_blocks():
        table = new_table()
        for k, day in before:
            table.put((k,), (k, day * DAY + k, 0))
        rows_before = sorted(table.scan(), key=lambda r: (r[1], r[0]))
        parts = list(table.partitions.keys())[:2]
        taken = [
            (table.scan(), None),
            (table.scan(parts), parts),
            (table.scan(None, DAY, 2 * DAY + 20), "range"),
        ]
        expected = {row[0]: row for row in rows_before}
        for delete, k, day in commit:
            if delete:
                table.delete((k,))
                expected.pop(k, None)
            else:
                row = (k, day * DAY + k, 1)
                table.put((k,), row)
                expected[k] = row
        whole, by_parts, ranged = (list(rows) for rows, _ in taken)
        assert whole == rows_before
        assert by_parts == [r for r in rows_before if table.place(r, (r[0],))[0] in parts]
        assert ranged == [r for r in rows_before if DAY <= r[1] <= 2 * DAY + 20]
        after = list(table.scan())
        assert after == sorted(expected.values(), key=lambda r: (r[1], r[0]))
        for k, row in expected.items():
            assert table.get((k,)) == row


@settings(max_examples=150, deadline=None)
@given(
    held=st.sets(st.integers(0, 200), max_size=60),
    new=st.sets(st.integers(0, 260), max_size=60),
    by_dict=st.booleans(),
)
def test_merged_takes_the_new_rows_by_key_or_in_key_order(
    held: set[int], new: set[int], by_dict: bool
) -> None:
    """`Blocks.merged` answers the same whether the new rows come as a dict or as a list in
    their keys' order (a load whose blocks hold their own rows): every row of both sides,
    in order, each block's dict holding its own keys; None when a key is held already; the
    partition merged into unchanged, and a write to the merged one leaves it so."""
    with small_blocks():
        partition = Blocks.from_dict({(k,): (f"h{k}",) for k in held})
        keys = [(k,) for k in sorted(new)]
        rows = {key: (f"n{key[0]}",) for key in keys}
        given_rows: Any = rows if by_dict else [rows[key] for key in keys]
        merged = partition.merged(keys, given_rows)
        if held & new:
            assert merged is None
            return
        assert merged is not None
        model = SortedDict({(k,): (f"h{k}",) for k in held})
        model.update(rows)
        check_reads(merged, model, [(k,) for k in range(-1, 262, 7)])
        assert list(partition.items()) == [((k,), (f"h{k}",)) for k in sorted(held)]
        merged[(300,)] = ("later",)
        assert (300,) not in partition and list(merged)[-1] == (300,)
