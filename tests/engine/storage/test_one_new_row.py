"""A commit of one new row (`Transaction.one_new_row`, or a prepared INSERT's
`Session.insert_new_row` without a transaction, logged and installed by
`Database.commit_new_row` without the general sealing) leaves what the general commit
leaves: the same log records, rows, memory counts, revisions and wake-ups, and the same
errors, on tables keyed or not, with a rev column or not, before-images or not, an index or
not; a reopened database holds what it committed."""

from __future__ import annotations

import tempfile
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.storage import records
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import KdbError

# Each table's CREATE, and how a statement writes one row of it from a number and a word.
TABLES = {
    "keyed": (
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)",
        lambda n, w: f"INSERT INTO t VALUES ({n}, {n / 4}, '{w}')",
    ),
    "rev": (
        "CREATE TABLE t (sym SYMBOL PRIMARY KEY, v DOUBLE, s STRING)",
        lambda n, w: f"INSERT INTO t (sym, s) VALUES ('S{n}', '{w}')",
    ),
    "rowids": (
        "CREATE TABLE t (v INT, s STRING)",
        lambda n, w: f"INSERT INTO t VALUES ({n}, '{w}')",
    ),
    "full": (
        "CREATE TABLE t (id INT PRIMARY KEY, s STRING) PARTITION BY NONE REPLICA IDENTITY FULL",
        lambda n, w: f"INSERT INTO t VALUES ({n}, '{w}')",
    ),
    "indexed": (
        "CREATE TABLE t (id INT PRIMARY KEY, s STRING); CREATE INDEX t_s ON t (s)",
        lambda n, w: f"INSERT INTO t VALUES ({n}, '{w}')",
    ),
}
# A step: one INSERT (a key seen before is a duplicate), two of them in one text (a commit
# each), one in BEGIN ... COMMIT, or what the general commit makes (an update, a delete,
# two rows in one transaction).
WORDS = st.sampled_from(["a", "bb", "", "x y"])
KINDS = ["insert", "insert", "insert", "update", "delete", "two", "begin", "begin2"]
STEPS = st.tuples(st.sampled_from(KINDS), st.integers(0, 6), WORDS)


def _run(session: Session, table: str, step: tuple[str, int, str]) -> object:
    kind, n, word = step
    insert = TABLES[table][1]
    text = {
        "insert": insert(n, word),
        "update": "UPDATE t SET s = 'u'",
        "delete": "DELETE FROM t WHERE s = 'bb'",
        "two": f"{insert(n, 'p')}; {insert(n + 10, 'q')}",
        "begin": f"BEGIN; {insert(n + 20, 'r')}; COMMIT",
        "begin2": f"BEGIN; {insert(n + 30, 's')}; {insert(n + 40, 't')}; COMMIT",
    }[kind]
    try:
        return session.execute(text, ()).message
    except KdbError as error:
        return type(error).__name__, str(error)


def _state(session: Session) -> dict[str, object]:
    """Everything a commit leaves behind that a reader may see."""
    database = session.database
    rows = session.execute("SELECT * FROM t", ()).rows
    values = {row[0] for row in rows}
    log = [
        (e.kind, e.table, e.payload, e.before)
        for lsn, payload in database.log.read(0)
        for e in records.decode(lsn, payload).entries
    ]
    return {
        "rows": list(rows),
        "log": log,
        "bytes": dict(database.table_bytes),
        "used": database.memory.used_by(database.name),
        "table_n": database.revisions.table_n("t"),
        "value_n": {v: database.revisions.value_n("t", v) for v in values},
    }


def _play(folder: Path, table: str, steps: list) -> tuple[list, dict]:
    """The steps' answers and the state they leave, which a reopen finds again."""
    instance = Instance.open(folder)
    with closing(instance.session()) as session:
        session.execute(TABLES[table][0], ())
        answers = [_run(session, table, step) for step in steps]
        state = _state(session)
    instance.close()
    reopened = Instance.open(folder)
    with closing(reopened.session()) as session:
        assert session.execute("SELECT * FROM t", ()).rows == state["rows"]
    reopened.close()
    return answers, state


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(TABLES)), st.lists(STEPS, min_size=1, max_size=8))
def test_a_new_rows_commit_leaves_what_the_general_commit_leaves(table, steps):
    taken = []
    one_new_row, insert_new_row = Transaction.one_new_row, Session.insert_new_row

    def counted(txn: Transaction) -> object:
        found = one_new_row(txn)
        taken.append(found is not None)
        return found

    def counted_direct(session: Session, *args: Any) -> bool:
        done = insert_new_row(session, *args)
        taken.append(done)
        return done

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(Transaction, "one_new_row", lambda txn: None)
        patch.setattr(Session, "insert_new_row", lambda session, *args: False)
        expected = _play(Path(folder) / "general", table, steps)
        patch.setattr(Transaction, "one_new_row", counted)
        patch.setattr(Session, "insert_new_row", counted_direct)
        got = _play(Path(folder) / "new_row", table, steps)
    assert got == expected
    if steps[0][0] in ("insert", "two", "begin"):  # a new key: its commit took the new path
        assert True in taken


def test_a_new_rows_commit_wakes_the_waiters_of_its_value(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path)
    with closing(instance.session()) as session:
        session.execute(TABLES["rev"][0], ())
        database = session.database
        woken, other = threading.Event(), threading.Event()
        database.wake_board.register("t", "S1", woken)
        database.wake_board.register("t", "S2", other)
        session.execute(TABLES["rev"][1](1, "a"), ())
        assert woken.is_set() and not other.is_set()
        assert database.revisions.value_n("t", "S1") > database.revisions.value_n("t", "S2")
    instance.close()


@pytest.mark.parametrize(
    ("columns", "rowids", "old"),
    [(("id", "s"), None, None), (("v", "s"), [7], None), (["id", "s"], None, [None])],
)
def test_a_new_rows_record_is_the_entrys(columns, rowids, old) -> None:
    entry = records.Entry.upsert("T", columns, [(1, "a")], rowids, old)
    record = records.encode_upsert(42, "T", columns, [(1, "a")], rowids, old)
    assert record == records.encode(42, [entry])
