"""Recovery's batched replay (storage.replay.Replay) against the committed tables and against
replaying the same log an entry at a time (apply_entry).

Random statements run on three tables (a keyed one with a secondary index, one without key,
a TIMESERIES one partitioned by day and symbol with a DEDUP key), single statements and
transactions of several, ALTER TABLE among them; then the folder is closed (its log small,
so no checkpoint is written) and opened again, which replays the whole log. The reopened
tables must equal what was committed (rows, identities, partitions, secondary indexes) and
what an entry-by-entry replay of the log builds (also the row id counters). Small batches
make the replay put its batches many times within one log.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage import ddl, records, replay
from refimpl.engine.storage.database import Database
from refimpl.engine.storage.replay import apply_entry
from refimpl.engine.storage.table import Table
from refimpl.errors import KdbError

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
    st.sampled_from(
        [
            "ALTER TABLE k ADD COLUMN w INT",
            "ALTER TABLE k DROP COLUMN s",
            "ALTER TABLE u ADD COLUMN c STRING",
            "TRUNCATE u",
        ]
    ),
)
# A step is one statement, or several in one transaction (one record of several entries).
step = st.one_of(statement.map(lambda s: [s]), st.lists(statement, min_size=2, max_size=4))


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


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=15), batch=st.sampled_from([1, 3, 1000]))
# Within one batch: a row put and then deleted; a key moved; rows of a table whose
# columns changed in between.
@example(steps=[["INSERT INTO k VALUES (1, 2, 'a')"], ["DELETE FROM k WHERE id <= 3"]], batch=1000)
@example(
    steps=[["INSERT INTO k VALUES (1, 2, 'a')", "UPDATE k SET id = 5 WHERE id = 1"]], batch=1000
)
@example(steps=[["INSERT INTO u VALUES (1, 'a')"], ["DELETE FROM u WHERE a >= 0"]], batch=1000)
@example(
    steps=[
        ["INSERT INTO u VALUES (1, 'a')"],
        ["ALTER TABLE u ADD COLUMN c STRING"],
        ["INSERT INTO u (a) VALUES (2), (NULL)"],
        ["DELETE FROM u WHERE a >= 2"],
    ],
    batch=1000,
)
def test_a_reopen_replays_the_log_into_the_committed_tables(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[list[str]],
    batch: int,
) -> None:
    monkeypatch.setattr(replay, "_BATCH_ROWS", batch)
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
