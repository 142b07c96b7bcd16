"""The memory limit on table data: the count against real measurement, kept exactly across
commits (a property), and refusals that change nothing."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage import ddl
from refimpl.engine.storage.memory_limit import table_bytes
from refimpl.errors import MemoryFull, SqlError
from refimpl.sql import ast
from tests.hypothesis_settings import OVER_FIXTURE
from tests.parsed import statement

TABLES = {
    "keyed": "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, name STRING, v DOUBLE)",
    "rowids": "CREATE TABLE t (id INT, name STRING, v DOUBLE)",
    "series": "CREATE TABLE t (ts TIMESTAMP, sym SYMBOL, v DOUBLE, PRIMARY KEY (sym, ts))",
    "unique": "CREATE TABLE t (id INT PRIMARY KEY, name STRING, v DOUBLE, UNIQUE (name))",
}


def _row(kind: str, i: int) -> tuple:
    start = 1_767_225_600_000_000
    if kind == "series":
        return (start + i * 1_000_000, f"s{i % 10}", i * 1.5)
    if kind == "keyed":
        return (i, start + i, f"name-{i}", i * 1.5)
    return (i, f"name-{i}", i * 1.5)


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_the_count_is_within_a_fifth_of_what_tracemalloc_measures(kind: str) -> None:
    table = ddl.create_table(statement(TABLES[kind], ast.CreateTable))
    n = 20_000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            row = _row(kind, i)
            ident = table.ident_of(row) if table.keyed else (table.allocate_rowid(),)
            table.put(ident, row)
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    counted = table_bytes(table)
    assert 0.8 * measured <= counted <= 1.2 * measured, (counted, measured)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    opened = Instance.open(tmp_path / "data", EngineOptions(memory_bytes=400_000))
    try:
        yield opened
    finally:
        opened.close()


def _used(instance: Instance) -> int:
    return instance.memory.used_bytes


def test_a_write_past_the_limit_is_refused_whole_and_reads_go_on(instance: Instance) -> None:
    session = instance.session("demo")
    session.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    session.execute("INSERT INTO t VALUES " + ", ".join(f"({i}, 'x')" for i in range(500)))
    used = _used(instance)
    lsn = instance.database("demo").log.durable_lsn
    values = ", ".join(f"({i}, '{'y' * 50}')" for i in range(500, 2500))
    with pytest.raises(MemoryFull, match="memory_mb"):
        session.execute(f"INSERT INTO t VALUES {values}")
    with pytest.raises(MemoryFull):
        session.execute(f"UPDATE t SET s = '{'z' * 2000}'")
    session.execute("BEGIN")
    session.execute(f"INSERT INTO t VALUES {values}")
    with pytest.raises(MemoryFull):
        session.execute("COMMIT")
    assert session.execute("SELECT count(*) FROM t").rows == [(500,)]
    assert session.execute("SELECT count(*) FROM t WHERE s <> 'x'").rows == [(0,)]
    assert _used(instance) == used
    assert instance.database("demo").log.durable_lsn == lsn  # nothing was logged
    session.execute("DELETE FROM t WHERE id < 250")  # shrinking always works
    assert _used(instance) < used


def test_the_limit_is_shared_by_the_databases(instance: Instance) -> None:
    instance.create_database("other")
    big = ", ".join(f"({i}, '{'y' * 40}')" for i in range(600))
    first = instance.session("demo")
    first.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    first.execute(f"INSERT INTO t VALUES {big}")
    second = instance.session("other")
    second.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    with pytest.raises(MemoryFull):
        second.execute(f"INSERT INTO t VALUES {big}")
    instance.drop_database("demo", current="other")
    second.execute(f"INSERT INTO t VALUES {big}")  # the dropped database's share is free


_statements = st.sampled_from(
    [
        "INSERT INTO t VALUES ({k}, '{s}', {k})",
        "UPDATE t SET s = '{s}' WHERE id = {k}",
        "UPDATE t SET id = id + 100 WHERE id = {k}",
        "DELETE FROM t WHERE id = {k}",
        "ALTER TABLE t ADD COLUMN c{k} STRING",
        "CREATE INDEX i{k} ON t (s)",
        "TRUNCATE TABLE t",
    ]
)


@settings(OVER_FIXTURE, max_examples=20)
@given(
    steps=st.lists(
        st.tuples(_statements, st.integers(0, 20), st.text("ab", max_size=30)), max_size=20
    )
)
def test_the_kept_count_is_what_a_recount_finds(tmp_path: Path, steps: list) -> None:
    opened = Instance.open(tmp_path / f"p{len(list(tmp_path.iterdir()))}")
    try:
        session = opened.session("demo")
        session.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, n INT)")
        for template, k, text in steps:
            try:
                session.execute(template.format(k=k, s=text))
            except SqlError:
                pass  # a duplicate key or index, say: refused whole, counted as nothing
        database = opened.database("demo")
        recount = {key: table_bytes(table) for key, table in database.tables.items()}
        assert database.table_bytes == recount
        assert opened.memory.used_by("demo") == sum(recount.values())
    finally:
        opened.close()
