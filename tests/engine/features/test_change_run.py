"""ChangeRun.changes: a run's `Change` records, whatever its length (a one-row run is made
without the maps a long one is made by, and must give the same record)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.features.change_stream import UNLOGGED, Change, ChangeRun

rows = st.tuples(st.integers(), st.text(max_size=3) | st.none())
olds = st.none() | st.just(UNLOGGED) | rows


@given(
    op=st.sampled_from(["upsert", "delete", "ddl"]),
    items=st.lists(rows, min_size=1, max_size=4),
    befores=st.none() | st.lists(olds, min_size=4, max_size=4),
    seq=st.integers(0, 10),
)
def test_each_change_is_its_item_at_its_place(
    op: str, items: list[Any], befores: list[Any] | None, seq: int
) -> None:
    if op != "upsert":
        items = [f"key{n}" for n in range(len(items))]
    old_rows = None if befores is None else befores[: len(items)]
    run = ChangeRun(7, 1000, seq, op, items, 2, old_rows)
    expected = [
        Change(
            7,
            seq + n,
            1000,
            op,
            None if op == "upsert" else item,
            item if op == "upsert" else (None, None),
            UNLOGGED if old_rows is None else old_rows[n],
        )
        for n, item in enumerate(items)
    ]
    assert list(run.changes()) == expected
