"""A checkpoint's image: the rows of one moment, taken under the write lock in a step per
block and listed after it, so that commits go on while a big table is copied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.statements import executor
from refimpl.engine.storage import checkpoint, table_image
from refimpl.engine.storage.database import Database
from refimpl.engine.storage.transaction import Transaction

NEVER = 1 << 62
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER)


def _opened(path: Path) -> Database:
    """A database with a keyed table k and a table u without a key, 3,000 rows each (more
    than one block)."""
    with refimpl.connect(path, options=OPTIONS) as connection:
        connection.execute("CREATE TABLE k (id BIGINT PRIMARY KEY, s STRING)")
        connection.execute("CREATE TABLE u (id BIGINT, s STRING)")
        values = ", ".join(f"({i}, 'r{i}')" for i in range(3000))
        connection.execute(f"INSERT INTO k VALUES {values}")
        connection.execute(f"INSERT INTO u VALUES {values}")
    return Database.open("demo", path / "demo", OPTIONS)


def _commit(database: Database, change: Callable[[Transaction], None]) -> None:
    """One durable commit; StatementTimeout when the write lock is not had within 1 s."""
    database.acquire_write(1.0)
    try:
        txn = Transaction(database.tables)
        change(txn)
        lsn = database.commit_locked(txn)
    finally:
        database.release_write()
    assert lsn is not None
    database.wait_durable(lsn)


def _change_both(txn: Transaction) -> None:
    for name in ("k", "u"):
        work = txn.table(name)
        executor.insert_values(work, work.schema, ["id", "s"], [(5000, "late")])
        table = work.current()
        work.delete((0,) if table.keyed else next(iter(table.index)))


def test_commits_go_on_while_the_image_is_listed_and_are_not_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = _opened(tmp_path / "data")
    try:
        before = {name: list(database.tables[name].scan()) for name in ("k", "u")}
        rowids_before = [ident[0] for ident, _ in database.tables["u"].scan_with_idents()]
        listed = table_image.TakenTable.image
        committed: list[bool] = []

        def commit_first(taken: table_image.TakenTable) -> checkpoint.TableImage:
            if not committed:  # the write lock is free again: a commit does not wait
                _commit(database, _change_both)
                committed.append(True)
            return listed(taken)

        monkeypatch.setattr(table_image.TakenTable, "image", commit_first)
        image = database.image()
        assert committed == [True]
        by_name = {table.create.split()[2].lower(): table for table in image.tables}
        assert by_name["k"].rows == before["k"] and by_name["k"].rowids is None
        assert by_name["u"].rows == before["u"]
        assert by_name["u"].rowids == rowids_before
        # The commit made while the image was listed is in the tables, not in the image.
        assert (5000, "late") in list(database.tables["k"].scan())
        assert (5000, "late") in list(database.tables["u"].scan())
        assert image.lsn < database.applied_lsn
    finally:
        database.close()


def test_a_checkpoint_taken_while_commits_go_on_reopens_to_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = _opened(tmp_path / "data")
    listed = table_image.TakenTable.image

    def commit_first(taken: table_image.TakenTable) -> checkpoint.TableImage:
        monkeypatch.setattr(table_image.TakenTable, "image", listed)
        _commit(database, _change_both)
        return listed(taken)

    monkeypatch.setattr(table_image.TakenTable, "image", commit_first)
    database.checkpoint()
    expected = {name: sorted(database.tables[name].scan()) for name in ("k", "u")}
    database.close()
    reopened = Database.open("demo", tmp_path / "data" / "demo", OPTIONS)
    try:
        for name in ("k", "u"):
            assert sorted(reopened.tables[name].scan()) == expected[name]
        assert (5000, "late") in expected["k"] and (0, "r0") not in expected["k"]
    finally:
        reopened.close()
