"""Recovery's batched replay (storage.replay.Replay) against the committed tables and against
replaying the same log an entry at a time (apply_entry).

Random statements run on five tables (a keyed one with a secondary index, one without key,
a TIMESERIES one partitioned by day and symbol with a DEDUP key, one keyed by one column and
one by two, neither with an index), single statements and transactions of several, ALTER
TABLE among them; then the folder is closed (its log small, so no checkpoint is written)
and opened again, which replays the whole log. The reopened tables must equal what was
committed (rows, identities, partitions, secondary indexes) and what an entry-by-entry
replay of the log builds (also the row id counters). Small batches make the replay put its
batches many times within one log; small reads split the log into runs of a record or two,
and frames across two reads. Runs of single-row inserts into one table take the replay's
short way, and the batches of tables ordered by identity go in as whole blocks: both meet
updates, deletes, schema changes and other tables' records in between.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage import database as database_module
from refimpl.engine.storage import ddl, records, replay, wal_segments
from refimpl.engine.storage.database import Database
from refimpl.engine.storage.replay import apply_entry
from refimpl.engine.storage.table import Table
from refimpl.errors import CorruptLog, KdbError
from tests.hypothesis_settings import OVER_FIXTURE

NEVER = 1 << 62
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER)
DAY = 86_400_000_000
BASE = 1_790_000_000_000_000
CREATE = [
    "CREATE TABLE k (id INT PRIMARY KEY, v INT, s STRING)",
    "CREATE INDEX k_v ON k (v)",
    "CREATE TABLE u (a INT, b STRING)",
    "CREATE TABLE ts (time TIMESTAMP, sym SYMBOL, v DOUBLE) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym) DEDUP KEY (sym, time)",
    "CREATE TABLE p (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE c (a INT, b INT, v INT, PRIMARY KEY (a, b))",
]

ids = st.integers(0, 12)
small = st.one_of(st.none(), st.integers(-3, 3))
text = st.sampled_from(["NULL", "''", "'a'", "'b c'", "'it''s'"])
times = st.builds(
    lambda d, h: BASE + d * DAY + h * 3_600_000_000, st.integers(0, 2), st.integers(0, 3)
)
symbol = st.sampled_from(["'A'", "'B'", "NULL"])


def _value(v: int | None) -> str:
    return "NULL" if v is None else str(v)


statement = st.one_of(
    st.builds(lambda i, v, s: f"INSERT INTO k VALUES ({i}, {_value(v)}, {s})", ids, small, text),
    st.builds(lambda i, v: f"UPDATE k SET v = {_value(v)} WHERE id >= {i}", ids, small),
    st.builds(lambda i, j: f"UPDATE k SET id = {j} WHERE id = {i}", ids, ids),
    st.builds(lambda i: f"DELETE FROM k WHERE id <= {i}", ids),
    st.builds(lambda a, b: f"INSERT INTO u VALUES ({_value(a)}, {b})", small, text),
    st.builds(lambda a, b: f"INSERT INTO u (a) VALUES ({_value(a)}), ({_value(b)})", small, small),
    st.builds(lambda a: f"UPDATE u SET b = 'x' WHERE a = {_value(a)}", small),
    st.builds(lambda a: f"DELETE FROM u WHERE a >= {_value(a)}", small),
    st.builds(
        lambda t, s, v: f"INSERT INTO ts VALUES ({t}, {s}, {_value(v)})", times, symbol, small
    ),
    st.builds(lambda t: f"DELETE FROM ts WHERE time <= {t}", times),
    st.builds(lambda v: f"UPDATE ts SET v = {_value(v)} WHERE sym = 'A'", small),
    st.builds(lambda i, v: f"INSERT INTO p VALUES ({i}, {_value(v)})", ids, small),
    st.builds(lambda i, v: f"UPDATE p SET v = {_value(v)} WHERE id >= {i}", ids, small),
    st.builds(lambda i: f"DELETE FROM p WHERE id = {i}", ids),
    st.builds(lambda a, b: f"INSERT INTO c VALUES ({a}, {b}, 1)", ids, ids),
    st.builds(lambda a: f"DELETE FROM c WHERE a = {a}", ids),
    st.sampled_from(
        [
            "ALTER TABLE k ADD COLUMN w INT",
            "ALTER TABLE k DROP COLUMN s",
            "ALTER TABLE u ADD COLUMN c STRING",
            "TRUNCATE u",
            "ALTER TABLE p ADD COLUMN w INT",
            "TRUNCATE p",
        ]
    ),
)
# Single-row inserts into one table, each its own commit: the replay's short way.
burst = st.one_of(
    st.lists(ids, min_size=2, max_size=8).map(
        lambda keys: [[f"INSERT INTO p VALUES ({i}, 0)"] for i in keys]
    ),
    st.lists(small, min_size=2, max_size=8).map(
        lambda values: [[f"INSERT INTO u VALUES ({_value(a)}, 'b')"] for a in values]
    ),
    st.lists(st.tuples(ids, ids), min_size=2, max_size=8).map(
        lambda keys: [[f"INSERT INTO c VALUES ({a}, {b}, 2)"] for a, b in keys]
    ),
)
# A step is one statement, or several in one transaction (one record of several entries).
step = st.one_of(statement.map(lambda s: [s]), st.lists(statement, min_size=2, max_size=4))
# Steps: single ones, and bursts of single-row inserts, in any order.
steps_of = st.lists(st.one_of(step.map(lambda s: [s]), burst), min_size=1, max_size=10).map(
    lambda groups: [s for group in groups for s in group]
)


def _committed(database: Database) -> dict[str, Any]:
    """What a reopen must rebuild: per table its definition, rows with identities in order,
    partitions, identity index and secondary indexes."""
    state: dict[str, Any] = {}
    for key, table in database.tables.items():
        state[key] = (
            ddl.canonical_create(table.schema),
            list(table.scan_with_idents()),
            list(table.partitions.keys()),
            dict(table.index),
            {name: list(index.entries) for name, index in table.secondary.items()},
        )
    return state


def _entry_by_entry(database: Database) -> dict[str, Table]:
    """The tables an entry-at-a-time replay of the whole log builds."""
    tables: dict[str, Table] = {}
    settings: dict[str, Any] = {"views": {}}
    for lsn, payload in database.log.read(0):
        for entry in records.decode(lsn, payload).entries:
            apply_entry(tables, settings, entry)
    return tables


@settings(OVER_FIXTURE, max_examples=60)
@given(steps=steps_of, batch=st.sampled_from([1, 3, 1000]), read=st.sampled_from([1, 40, 1 << 20]))
# Within one batch: a row put and then deleted; a key moved; rows of a table whose
# columns changed in between.
@example(
    steps=[["INSERT INTO k VALUES (1, 2, 'a')"], ["DELETE FROM k WHERE id <= 3"]],
    batch=1000,
    read=1 << 20,
)
@example(
    steps=[["INSERT INTO k VALUES (1, 2, 'a')", "UPDATE k SET id = 5 WHERE id = 1"]],
    batch=1000,
    read=1 << 20,
)
@example(
    steps=[["INSERT INTO u VALUES (1, 'a')"], ["DELETE FROM u WHERE a >= 0"]],
    batch=1000,
    read=1 << 20,
)
@example(
    steps=[
        ["INSERT INTO u VALUES (1, 'a')"],
        ["ALTER TABLE u ADD COLUMN c STRING"],
        ["INSERT INTO u (a) VALUES (2), (NULL)"],
        ["DELETE FROM u WHERE a >= 2"],
    ],
    batch=1000,
    read=1 << 20,
)
# Runs of single-row inserts (the short way) broken by a record of two tables, an update, a
# delete of a row in the batch, a schema change (rows then on other columns), and rows
# after the table's last (as whole blocks) and before it; read a frame or two at a time.
@example(
    steps=[
        ["INSERT INTO p VALUES (1, 1)"],
        ["INSERT INTO p VALUES (2, 1)"],
        ["INSERT INTO c VALUES (1, 2, 1)"],
        ["INSERT INTO p VALUES (3, 1)"],
        ["INSERT INTO p VALUES (4, 1)", "INSERT INTO u VALUES (1, 'a')"],
        ["INSERT INTO p VALUES (5, 1)"],
        ["UPDATE p SET v = 2 WHERE id >= 4"],
        ["INSERT INTO p VALUES (6, 1)"],
        ["DELETE FROM p WHERE id = 5"],
        ["INSERT INTO p VALUES (7, 1)"],
        ["ALTER TABLE p ADD COLUMN w INT"],
        ["INSERT INTO p VALUES (8, 1, 3)"],
        ["INSERT INTO p VALUES (0, 1, 3)"],
        ["INSERT INTO u VALUES (2, 'b')"],
        ["INSERT INTO u VALUES (3, 'c')"],
        ["DELETE FROM u WHERE a >= 3"],
        ["INSERT INTO u VALUES (4, 'd')"],
    ],
    batch=3,
    read=40,
)
def test_a_reopen_replays_the_log_into_the_committed_tables(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[list[str]],
    batch: int,
    read: int,
) -> None:
    monkeypatch.setattr(replay, "_BATCH_ROWS", batch)
    monkeypatch.setattr(wal_segments, "RUN_BYTES", read)
    path = tmp_path_factory.mktemp("replay") / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        session = connection.session()
        for sql in CREATE:
            session.execute(sql)
        for statements in steps:
            script = statements if len(statements) == 1 else ["BEGIN", *statements, "COMMIT"]
            for sql in script:
                try:
                    session.execute(sql)
                except KdbError:
                    break  # a failing statement rolls its transaction back
        committed = _committed(connection.instance.database("demo"))
    with refimpl.connect(path, options=OPTIONS) as connection:
        database = connection.instance.database("demo")
        assert database.checkpoint_lsn == 0  # the whole log was replayed
        assert _committed(database) == committed
        reference = _entry_by_entry(database)
        assert sorted(reference) == sorted(database.tables)
        for key, table in database.tables.items():
            assert list(table.scan_with_idents()) == list(reference[key].scan_with_idents())
            assert table.next_rowid == reference[key].next_rowid


@pytest.mark.parametrize("bad", [1, 3, 5])
def test_a_record_that_cannot_replay_is_named_by_its_lsn(tmp_path: Path, bad: int) -> None:
    """Among single-row inserts that take the short way, one into a table the log never
    created: the open refuses the log and names that record, wherever it is in its run."""
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        connection.execute("CREATE TABLE p (id INT PRIMARY KEY, v INT)")
        log = connection.instance.database("demo").log
        for i in range(6):
            table = "nope" if i == bad else "p"
            entry = records.Entry.upsert(table, ["id", "v"], [(i, 0)], None)
            lsn = log.append(records.encode(1_790_000_000_000_000 + i, [entry]))
        log.wait_durable(lsn)
        first = lsn - 5
    with pytest.raises(CorruptLog, match=f"the record at LSN {first + bad} cannot replay"):
        Database.open("demo", path / "demo", OPTIONS)


@pytest.mark.parametrize("bad", [1, 4])
def test_a_batch_that_cannot_go_into_its_table_is_a_corrupt_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: int
) -> None:
    """Rows batched from earlier records go into their table before a run once the batches
    are full, or at the end: a row that cannot (a time of another type) refuses the log as
    a record of the run does (CorruptLog, the record named as after the checkpoint), never
    with the raw error of the table."""
    monkeypatch.setattr(replay, "_BATCH_ROWS", 3)
    monkeypatch.setattr(database_module, "REPORT_EVERY", 2)  # runs of two records
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        connection.execute("CREATE TABLE q (t TIMESTAMP, v BIGINT) TIMESERIES(t) PARTITION BY DAY")
        log = connection.instance.database("demo").log
        for i in range(6):
            time: Any = "not a time" if i == bad else 1_790_000_000_000_000 + i
            entry = records.Entry.upsert("q", ["t", "v"], [(time, i)], [i + 1])
            lsn = log.append(records.encode(1_790_000_000_000_000 + i, [entry]))
        log.wait_durable(lsn)
    with pytest.raises(CorruptLog, match="a record after LSN 0 cannot replay: unsupported"):
        Database.open("demo", path / "demo", OPTIONS)
