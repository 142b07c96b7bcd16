"""Statements a caller runs as one text (`Session.begin_text`, the PostgreSQL protocol's
simple Query of several): one implicit transaction, as PostgreSQL runs them. They commit
together after the last (one LSN in the change stream), an error undoes them all, a BEGIN
among them makes the transaction a block with them in it, a COMMIT or ROLLBACK ends it and
the next statement begins another, SAVEPOINT and the statements that cannot be undone are
refused, and all of them share one moment."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.errors import DuplicateKey, InsideTransactionBlock, KdbError, NoActiveTransaction
from refimpl.sql.parser import parse


@pytest.fixture
def session(instance: Instance) -> Iterator[Session]:
    opened = instance.session()
    opened.keeps_failed = True  # as the PostgreSQL protocol's sessions
    opened.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    yield opened
    opened.close()


def run_text(session: Session, statements: Sequence[str]) -> KdbError | None:
    """The statements as one text, as the PostgreSQL protocol runs them: the first error
    ends it (returned), the implicit transaction then rolled back."""
    session.begin_text()
    try:
        for sql in statements:
            session.in_text(parse(sql).statements[0])
            session.execute(sql)
    except KdbError as error:
        session.end_text(committed=False)
        return error
    session.end_text(committed=True)
    return None


def ids(session: Session) -> list[int]:
    return [row[0] for row in session.execute("SELECT id FROM t ORDER BY id").rows]


def change_lsns(session: Session) -> list[int]:
    """The LSN of each row change of `t` (the change stream's transactions)."""
    rows = session.execute("SELECT lsn, op FROM changes('t')").rows
    return [lsn for lsn, op in rows if op != "ddl"]


def test_the_statements_of_a_text_commit_as_one_transaction(session: Session) -> None:
    assert run_text(session, ["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2), (3)"]) is None
    assert ids(session) == [1, 2, 3]
    lsns = change_lsns(session)
    assert len(lsns) == 3 and len(set(lsns)) == 1, lsns
    assert session.transaction is None and not session.implicit


def test_an_error_undoes_the_statements_before_it(session: Session) -> None:
    error = run_text(session, ["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2), (1)"])
    assert isinstance(error, DuplicateKey)
    assert ids(session) == []
    assert change_lsns(session) == []
    assert session.transaction is None and not session.failed
    # The write lock went with it: another session writes at once.
    assert run_text(session, ["INSERT INTO t VALUES (5)"]) is None


def test_a_begin_makes_the_statements_before_it_part_of_its_block(session: Session) -> None:
    assert (
        run_text(session, ["INSERT INTO t VALUES (1)", "BEGIN", "INSERT INTO t VALUES (2)"]) is None
    )
    assert session.transaction is not None and not session.implicit  # open after the text
    session.execute("ROLLBACK")
    assert ids(session) == []


def test_an_error_after_a_begin_leaves_the_block_failed(session: Session) -> None:
    error = run_text(session, ["BEGIN", "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (1)"])
    assert isinstance(error, DuplicateKey)
    assert session.transaction is not None and session.failed
    session.execute("ROLLBACK")
    assert ids(session) == []


def test_a_commit_ends_one_transaction_and_the_next_statement_begins_another(
    session: Session,
) -> None:
    text = [
        "INSERT INTO t VALUES (1)",
        "COMMIT",
        "INSERT INTO t VALUES (2)",
        "INSERT INTO t VALUES (1)",
    ]
    assert isinstance(run_text(session, text), DuplicateKey)
    assert ids(session) == [1]
    assert (
        run_text(session, ["INSERT INTO t VALUES (3)", "ROLLBACK", "INSERT INTO t VALUES (4)"])
        is None
    )
    assert ids(session) == [1, 4]


def test_a_block_opened_before_the_text_takes_its_statements(session: Session) -> None:
    session.execute("BEGIN")
    assert run_text(session, ["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)"]) is None
    assert session.transaction is not None and not session.implicit
    session.execute("ROLLBACK")
    assert ids(session) == []


@pytest.mark.parametrize("sql", ["SAVEPOINT s", "RELEASE SAVEPOINT s", "ROLLBACK TO SAVEPOINT s"])
def test_savepoints_are_refused_outside_a_block(session: Session, sql: str) -> None:
    error = run_text(session, ["INSERT INTO t VALUES (1)", sql])
    assert isinstance(error, NoActiveTransaction)
    assert "can only be used in transaction blocks" in str(error)
    assert ids(session) == []


@pytest.mark.parametrize(
    "sql",
    ["CHECKPOINT", "CREATE DATABASE other", "CREATE USER someone", "BACKUP DATABASE demo TO 'b'"],
)
def test_a_statement_no_transaction_can_undo_is_refused_among_others(
    session: Session, sql: str
) -> None:
    error = run_text(session, ["INSERT INTO t VALUES (1)", sql])
    assert isinstance(error, InsideTransactionBlock)
    assert "send it in a query of its own" in str(error)
    assert ids(session) == []
    session.execute(sql)  # sent alone, it runs


def test_the_statements_of_a_text_share_one_moment(session: Session) -> None:
    session.execute("CREATE TABLE m (k INT, at TIMESTAMP, began TIMESTAMP)")
    text = [
        "INSERT INTO m VALUES (1, now(), statement_timestamp())",
        "INSERT INTO m SELECT 2, now(), statement_timestamp() FROM m",
        "COMMIT",
        "INSERT INTO m VALUES (3, now(), statement_timestamp())",
    ]
    assert run_text(session, text) is None
    rows = session.execute("SELECT at, began FROM m").rows
    assert len({value for row in rows for value in row}) == 1, rows
    # Outside a text, each statement has its own moment again.
    session.execute("INSERT INTO m VALUES (4, now(), statement_timestamp())")
    (later,) = session.execute("SELECT at FROM m WHERE k = 4").rows
    assert later[0] > rows[0][0]


def test_a_text_of_queries_holds_no_writer_off(session: Session, instance: Instance) -> None:
    writer = instance.session()
    wrote = threading.Event()

    def write() -> None:
        writer.execute("INSERT INTO t VALUES (7)")
        wrote.set()

    session.begin_text()
    try:
        session.in_text(parse("SELECT 1").statements[0])
        session.execute("SELECT count(*) FROM t")
        assert session.transaction is None  # no implicit transaction, no write lock
        thread = threading.Thread(target=write)
        thread.start()
        # Liveness, not speed: with the write lock held the INSERT would wait for the text.
        assert wrote.wait(10)
        thread.join()
        session.in_text(parse("SELECT 1").statements[0])
        assert session.execute("SELECT count(*) FROM t").rows == [(1,)]
    finally:
        session.end_text(committed=True)
        writer.close()
    assert session.transaction is None and not session.implicit


def test_an_error_undoes_the_changes_after_the_queries_before_them(session: Session) -> None:
    text = ["SELECT count(*) FROM t", "INSERT INTO t VALUES (1)", "SELECT id FROM t"]
    error = run_text(session, [*text, "INSERT INTO t VALUES (1)"])
    assert isinstance(error, DuplicateKey)
    assert ids(session) == [] and change_lsns(session) == []
    assert session.transaction is None and not session.implicit
