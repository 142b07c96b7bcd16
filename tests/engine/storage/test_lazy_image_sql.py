"""A table reopened from a checkpoint keeps its chunks encoded (`Table.load_image`); SQL on
it, checkpoints of it half-decoded, clean reopens and reopens of what a killed process
leaves (a copy of the data folder while it runs) must keep what a model of the table holds,
and the database's memory count of the table must stay what a count of its rows gives.

Blocks and chunks are made tiny so that a few dozen rows make many of each.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.statements import values_load
from refimpl.engine.storage import blocks, checkpoint
from refimpl.engine.storage.memory_limit import table_bytes
from refimpl.engine.storage.table import OrderIndex
from tests.hypothesis_settings import OVER_FIXTURE

NEVER = 1 << 62
# No background checkpoint: only CHECKPOINT and a clean close write one.
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER)

SCHEMAS = {
    "keyed": "CREATE TABLE q (k BIGINT PRIMARY KEY, s STRING, v INT)",
    "rowids": "CREATE TABLE q (k BIGINT, s STRING, v INT)",
    "pair": "CREATE TABLE q (k BIGINT, s STRING, v INT, PRIMARY KEY (k, v))",
}

keys = st.integers(-30, 30)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(keys, min_size=1, max_size=6, unique=True)),
        st.tuples(st.just("load"), st.lists(keys, min_size=3, max_size=12, unique=True)),
        st.tuples(st.just("update"), keys, keys),
        st.tuples(st.just("delete"), keys, keys),
        st.tuples(st.just("rollback"), keys),
        st.tuples(st.just("range"), keys, keys),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash")),
        st.tuples(st.just("index")),
        st.tuples(st.just("unindex")),
        st.tuples(st.just("alter")),
        st.tuples(st.just("full")),
        st.tuples(st.just("truncate")),
    ),
    max_size=14,
)


@pytest.fixture
def tiny() -> Iterator[None]:
    saved = blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS
    blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS = 8, 4, 2, 3
    rows = values_load.BULK_VALUES_ROWS
    values_load.BULK_VALUES_ROWS = 3  # three rows of VALUES load as an import does
    try:
        yield
    finally:
        blocks.BLOCK_ROWS, blocks._HALF, blocks._SMALL, checkpoint.CHUNK_ROWS = saved
        values_load.BULK_VALUES_ROWS = rows


class Opened:
    """An instance on a data folder and a session of it; reopened cleanly or from a copy of
    its folder taken while it runs (what a killed process leaves of durable commits)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copies = count()
        self.instance = Instance.open(folder, OPTIONS)
        self.session = self.instance.session()

    def close(self) -> None:
        self.session.close()
        self.instance.close()

    def reopen(self, crash: bool) -> None:
        if crash:
            copy = self.folder.with_name(f"{self.folder.name}-{next(self.copies)}")
            shutil.copytree(self.folder, copy, ignore=shutil.ignore_patterns(".lock"))
            self.close()
            self.folder = copy
        else:
            self.close()
        self.instance = Instance.open(self.folder, OPTIONS)
        self.session = self.instance.session()


def _text(k: int, version: int) -> str | None:
    return None if (k + version) % 4 == 0 else f"{k}:{version}" * (abs(k) % 3 + 1)


@settings(OVER_FIXTURE, max_examples=40)
@given(
    kind=st.sampled_from(sorted(SCHEMAS)),
    first=st.lists(keys, unique=True, max_size=40),
    plan=steps,
)
def test_sql_on_an_encoded_image_keeps_the_rows_and_their_count(
    tiny: None,
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    first: list[int],
    plan: list[tuple[Any, ...]],
) -> None:
    opened = Opened(tmp_path_factory.mktemp("lazy") / "data")
    session = opened.session
    session.execute(SCHEMAS[kind])
    model: dict[int, tuple[Any, ...]] = {}  # k -> (k, s, v); v is 1 for every row
    version = count(1)

    def insert(ks: list[int]) -> None:
        """One row a statement: fewer than the rows a VALUES load needs."""
        now = next(version)
        for k in ks:
            if k not in model:
                opened.session.execute(
                    "INSERT INTO q (k, s, v) VALUES (?, ?, 1)", [k, _text(k, now)]
                )
                model[k] = (k, _text(k, now), 1)

    def load(ks: list[int]) -> None:
        """One VALUES list of every row (a load when there are three or more)."""
        now = next(version)
        fresh = [k for k in ks if k not in model]
        if not fresh:
            return
        listed = ", ".join(f"({k}, ?, 1)" for k in fresh)
        opened.session.execute(
            f"INSERT INTO q (k, s, v) VALUES {listed}", [_text(k, now) for k in fresh]
        )
        model.update({k: (k, _text(k, now), 1) for k in fresh})

    load(first)
    session.execute("CHECKPOINT")
    opened.reopen(crash=False)
    lazy = isinstance(opened.session.database.committed_table("q").index, OrderIndex)
    assert lazy or not first  # loaded with its chunks encoded
    try:
        for step in plan:
            session = opened.session
            match step:
                case ("insert", ks):
                    insert(ks)
                case ("load", ks):
                    load(ks)
                case ("update", low, high):
                    session.execute(
                        "UPDATE q SET s = 'u' || CAST(k AS STRING) WHERE k >= ? AND k <= ?",
                        [low, high],
                    )
                    for k in model:
                        if low <= k <= high:
                            model[k] = (k, f"u{k}", 1)
                case ("delete", low, high):
                    session.execute("DELETE FROM q WHERE k >= ? AND k <= ?", [low, high])
                    model = {k: row for k, row in model.items() if not low <= k <= high}
                case ("rollback", k):
                    session.execute("BEGIN")
                    session.execute("DELETE FROM q WHERE k <> ?", [k])
                    session.execute("INSERT INTO q (k, s, v) VALUES (1000, 'r', 1)")
                    session.execute("ROLLBACK")
                case ("range", low, high):
                    got = session.execute(
                        "SELECT k, s, v FROM q WHERE k >= ? AND k < ? ORDER BY k", [low, high]
                    ).rows
                    assert got == [model[k] for k in sorted(model) if low <= k < high]
                case ("checkpoint",):
                    session.execute("CHECKPOINT")
                case ("reopen",):
                    opened.reopen(crash=False)
                case ("crash",):
                    opened.reopen(crash=True)
                case ("index",):
                    session.execute("CREATE INDEX IF NOT EXISTS q_s ON q (s)")
                case ("unindex",):
                    session.execute("DROP INDEX IF EXISTS q_s ON q")
                case ("alter",):
                    session.execute(f"ALTER TABLE q ADD COLUMN w{next(version)} INT")
                case ("full",):
                    session.execute("ALTER TABLE q REPLICA IDENTITY FULL")
                case ("truncate",):
                    session.execute("TRUNCATE q")
                    model.clear()
            session = opened.session
            rows = session.execute("SELECT k, s, v FROM q ORDER BY k").rows
            assert rows == [model[k] for k in sorted(model)], step
            database = session.database
            table = database.committed_table("q")
            assert len(table) == len(model)
            assert database.table_bytes.get("q", 0) == table_bytes(table), step
    finally:
        opened.close()
