"""Reopening a database: the checkpoint a clean close writes, and what a reopen replays.

The tests write through the engine's commit path, close the database (or abandon it
without closing, which leaves on disk what a killed process leaves once its commits were
durable), open the folder again and compare the tables with what was written.
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.progress import Progress
from refimpl.engine.statements import executor
from refimpl.engine.storage import checkpoint, ddl
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, CLOSE_CHECKPOINT_BYTES, Database
from refimpl.engine.storage.memory_limit import table_bytes
from refimpl.engine.storage.transaction import Transaction

NEVER = 1 << 62
# No background checkpoint: only a close (or CHECKPOINT) writes one.
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER)
TEXT = "x" * 4000
# Commits of one TEXT row each that make the log pass the close's threshold.
OVER_THRESHOLD = CLOSE_CHECKPOINT_BYTES // len(TEXT) + 20


def _created(path: Path) -> Path:
    """A data folder whose database `demo` holds an empty table t; its database folder."""
    with refimpl.connect(path, options=OPTIONS) as connection:
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, s STRING)")
    return path / "demo"


def _insert(database: Database, first: int, count: int, text: str = TEXT) -> None:
    """Rows first .. first+count-1 of t, one durable commit each."""
    for i in range(first, first + count):
        database.acquire_write()
        try:
            txn = Transaction(database.tables)
            work = txn.table("t")
            executor.insert_values(work, work.schema, ["id", "s"], [(i, text)])
            lsn = database.commit_locked(txn)
        finally:
            database.release_write()
        assert lsn is not None
        database.wait_durable(lsn)


def _open(folder: Path, replayed: list[int]) -> Database:
    """Database.open, noting in `replayed` how many records the recovery replayed."""

    def heard(progress: Progress) -> None:
        if progress.done == progress.total:
            replayed.append(progress.total)

    return Database.open("demo", folder, OPTIONS, progress=heard)


def _checkpoint_lsns(folder: Path) -> list[int]:
    return [lsn for lsn, _ in checkpoint.list_checkpoints(folder / CHECKPOINT_FOLDER)]


def _ids(database: Database) -> list[int]:
    return [row[0] for row in database.tables["t"].scan()]


def test_a_clean_close_checkpoints_a_long_log_and_the_reopen_replays_none_of_it(
    tmp_path: Path,
) -> None:
    folder = _created(tmp_path / "data")
    database = _open(folder, [])
    _insert(database, 0, OVER_THRESHOLD)
    last = database.log.durable_lsn
    database.close()
    assert _checkpoint_lsns(folder) == [last]
    replayed: list[int] = []
    database = _open(folder, replayed)
    try:
        assert replayed == [0]
        assert database.checkpoint_lsn == last
        assert _ids(database) == list(range(OVER_THRESHOLD))
    finally:
        database.close()


def test_a_clean_close_after_a_short_log_writes_no_checkpoint(tmp_path: Path) -> None:
    folder = _created(tmp_path / "data")
    database = _open(folder, [])
    _insert(database, 0, 10)
    database.close()
    assert _checkpoint_lsns(folder) == []
    replayed: list[int] = []
    database = _open(folder, replayed)
    try:
        assert replayed == [11]  # the CREATE TABLE and the ten inserts
        assert _ids(database) == list(range(10))
    finally:
        database.close()


def test_the_log_a_crash_recovery_replayed_counts_towards_the_close_checkpoint(
    tmp_path: Path,
) -> None:
    folder = _created(tmp_path / "data")
    crashed = _open(folder, [])
    _insert(crashed, 0, OVER_THRESHOLD)
    # Abandoned without a close, as a killed process leaves it: every commit was durable.
    replayed: list[int] = []
    database = _open(folder, replayed)
    assert replayed == [OVER_THRESHOLD + 1]
    _insert(database, OVER_THRESHOLD, 1, "short")  # far below the threshold on its own
    last = database.log.durable_lsn
    database.close()
    assert _checkpoint_lsns(folder) == [last]
    replayed.clear()
    database = _open(folder, replayed)
    try:
        assert replayed == [0]
        assert _ids(database) == list(range(OVER_THRESHOLD + 1))
    finally:
        database.close()


def test_a_transaction_holding_the_write_lock_at_close_leaves_the_checkpoint_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _created(tmp_path / "data")
    database = _open(folder, [])
    _insert(database, 0, OVER_THRESHOLD)
    database.acquire_write()  # a transaction left open: the close does not wait for it long
    try:
        with caplog.at_level(logging.ERROR):
            database.close()
    finally:
        database.release_write()
    assert _checkpoint_lsns(folder) == []
    assert "the checkpoint of database 'demo' at its close failed" in caplog.text
    replayed: list[int] = []
    database = _open(folder, replayed)
    try:
        assert replayed == [OVER_THRESHOLD + 1]  # the log still holds every commit
        assert _ids(database) == list(range(OVER_THRESHOLD))
    finally:
        database.close()


def test_checkpoint_bytes_of_log_start_a_checkpoint_also_within_one_segment(
    tmp_path: Path,
) -> None:
    """`checkpoint_bytes` bounds what a crash replays: a background checkpoint starts once
    that much log was written since the last, however large a segment is (64 MB here)."""
    folder = _created(tmp_path / "data")
    options = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=64 * 1024)
    database = Database.open("demo", folder, options)
    _insert(database, 0, 15)  # 60 KB of log: not yet
    assert database.checkpoints_written == 0
    _insert(database, 15, 5)  # past 64 KB with the 17th row, the record at LSN 18
    deadline = time.monotonic() + 30
    while database.checkpoints_written == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # it runs in a thread of its own, writers going on meanwhile
    (written,) = _checkpoint_lsns(folder)
    assert 18 <= written <= 21
    # Abandoned without a close, as a killed process leaves it: a reopen replays only the
    # log after that checkpoint.
    replayed: list[int] = []
    database = _open(folder, replayed)
    try:
        assert replayed == [21 - written]
        assert _ids(database) == list(range(20))
    finally:
        database.close()


TABLES = [
    "CREATE TABLE every (id BIGINT PRIMARY KEY, i INT, d DOUBLE, b BOOLEAN, s STRING,"
    " y SYMBOL, t TIMESTAMP)",
    "CREATE INDEX every_s ON every (s, i)",
    "CREATE TABLE loose (a INT, s STRING)",
    "CREATE TABLE ticks (time TIMESTAMP, sym SYMBOL, v DOUBLE) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym) DEDUP KEY (sym, time)",
    "CREATE TABLE pair (a INT, b STRING, v INT, PRIMARY KEY (a, b))",
]
ROWS = [
    "INSERT INTO every VALUES (1, 7, 0.5, true, 'it''s', 'A', 1790000000000000),"
    " (2, NULL, NULL, NULL, NULL, NULL, NULL), (3, -2, -1e300, false, '', 'B', 0),"
    " (-4, 2147483647, 3.25, true, 'Zürich', 'A', 1790086400000000)",
    "INSERT INTO loose VALUES (1, 'a'), (NULL, NULL), (1, 'a'), (3, 'c')",
    "DELETE FROM loose WHERE a = 3",  # the row id counter runs past the rows kept
    "INSERT INTO ticks VALUES (1790000000000000, 'A', 1), (1790086400000000, 'A', 2),"
    " (1790000000000000, 'B', NULL), (1790003600000000, 'A', 4)",
    "INSERT INTO pair VALUES (1, 'x', 1), (1, 'y', 2), (0, 'z', NULL)",
]


def _whole(database: Database) -> dict[str, tuple[Any, ...]]:
    """Every table's definition, rows with identities in order, partitions, identity index,
    secondary indexes, row id counter and what its rows count towards the memory limit."""
    return {
        key: (
            ddl.canonical_create(table.schema),
            list(table.scan_with_idents()),
            list(table.partitions.keys()),
            dict(table.index),
            {name: list(index.entries) for name, index in table.secondary.items()},
            table.next_rowid,
            database.table_bytes[key],
            table_bytes(table),
        )
        for key, table in database.tables.items()
    }


@pytest.mark.parametrize("tail", [[], ["INSERT INTO loose VALUES (9, 'tail')"], ["TRUNCATE ticks"]])
def test_a_checkpoint_loads_back_every_table_as_it_was_written(
    tmp_path: Path, tail: list[str]
) -> None:
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        for sql in TABLES + ROWS:
            connection.execute(sql)
        connection.execute("CHECKPOINT")
        for sql in tail:  # replayed after the checkpoint's tables are loaded
            connection.execute(sql)
        written = _whole(connection.instance.database("demo"))
    with refimpl.connect(path, options=OPTIONS) as connection:
        database = connection.instance.database("demo")
        assert database.checkpoint_lsn > 0
        reopened = _whole(database)
        assert reopened == written
        for figures in reopened.values():
            assert figures[-2] == figures[-1]  # the count kept equals a count from scratch
        assert database.memory.used_by("demo") == sum(database.table_bytes.values())


def _checkpointed_big_table(connection: refimpl.Connection) -> None:
    """A table `big` of 5,000 keyed rows (five checkpoint chunks of 1,024 rows at most),
    checkpointed."""
    connection.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, s STRING)")
    values = ", ".join(f"({i}, 'r{i}')" for i in range(5000))
    connection.execute(f"INSERT INTO big VALUES {values}")
    connection.execute("CHECKPOINT")


def test_a_reopen_decodes_only_the_blocks_statements_touch_and_checkpoints_them_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        _checkpointed_big_table(connection)
        counted = connection.instance.database("demo").table_bytes["big"]
    with refimpl.connect(path, options=OPTIONS) as connection:
        database = connection.instance.database("demo")
        held = database.tables["big"].partitions[()]._blocks
        assert [block.encoded for block in held] == [True] * 5  # chunks of 1,024 rows
        assert database.table_bytes["big"] == counted  # counted without decoding a row
        assert connection.execute("SELECT s FROM big WHERE id = 4321").rows == [("r4321",)]
        assert [block.encoded for block in held] == [True, True, True, True, False]
        connection.execute("INSERT INTO big VALUES (7000, 'late')")
        connection.execute("DELETE FROM big WHERE id = 4999")
        connection.execute("CHECKPOINT")  # of a table half decoded
        held = database.tables["big"].partitions[()]._blocks
        # The blocks still encoded went into the checkpoint as they were, not decoded.
        assert [block.encoded for block in held] == [True, True, True, True, False]
        assert connection.execute("SELECT count(*) FROM big").rows == [(5000,)]
        assert database.table_bytes["big"] == table_bytes(database.tables["big"])
        expected = list(database.tables["big"].scan())
    with refimpl.connect(path, options=OPTIONS) as connection:
        database = connection.instance.database("demo")
        assert list(database.tables["big"].scan()) == expected
        assert expected[-1] == (7000, "late") and (4999, "r4999") not in expected
        assert database.table_bytes["big"] == table_bytes(database.tables["big"])


def test_a_replay_after_a_checkpoint_adds_rows_after_its_last_without_decoding_its_blocks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        _checkpointed_big_table(connection)
        for i in range(5000, 5010):  # replayed at the reopen: the log after it is short
            connection.execute(f"INSERT INTO big VALUES ({i}, 'late')")
    replayed: list[int] = []
    database = _open(path / "demo", replayed)
    try:
        assert replayed == [10]
        held = database.tables["big"].partitions[()]._blocks
        # The rows went into the last block: the four before it are as the checkpoint
        # stored them, not decoded to find where the rows go.
        assert [block.encoded for block in held] == [True, True, True, True, False]
        rows = list(database.tables["big"].scan())
        assert len(rows) == 5010 and rows[-1] == (5009, "late") and rows[0] == (0, "r0")
        assert database.table_bytes["big"] == table_bytes(database.tables["big"])
    finally:
        database.close()


def test_a_checkpoint_file_of_the_first_format_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with refimpl.connect(path, options=OPTIONS) as connection:
        for sql in TABLES + ROWS:
            connection.execute(sql)
        connection.execute("CHECKPOINT")
        written = _whole(connection.instance.database("demo"))
    ((_, file),) = checkpoint.list_checkpoints(path / "demo" / CHECKPOINT_FOLDER)
    image = checkpoint.read(file)
    body = msgspec.msgpack.encode(
        {
            "lsn": image.lsn,
            "settings": image.settings,
            "tables": [[t.create, t.next_rowid, t.rows, t.rowids] for t in image.tables],
        }
    )
    file.write_bytes(struct.pack("<8sQI", b"KDBCKPT1", len(body), zlib.crc32(body)) + body)
    with refimpl.connect(path, options=OPTIONS) as connection:
        assert _whole(connection.instance.database("demo")) == written
