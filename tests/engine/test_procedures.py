"""Procedures in the engine: a CALL is one transaction (one LSN, revisions move at its commit
only, all or nothing), bounded by the statement timeout, run with the caller's rights; its
parameters bind by name; procedures are schema that survives a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.errors import (
    DuplicateKey,
    Forbidden,
    NotAllowed,
    RoutineExists,
    SqlError,
    SqlSyntaxError,
    StatementTimeout,
    UnknownRoutine,
)

TWO_TABLES = (
    "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
    "CREATE PROCEDURE both_(id INT, v INT) LANGUAGE SQL AS $$"
    " INSERT INTO a VALUES (id, v); INSERT INTO b VALUES (id, both_.v * 10) $$",
)


@pytest.fixture
def session(session: Session) -> Session:
    """The engine's session fixture, with the two tables and the procedure that writes both."""
    for sql in TWO_TABLES:
        session.execute(sql)
    return session


def rows(session: Session, sql: str) -> list[tuple]:
    return session.execute(sql).rows


def test_a_call_is_one_commit_under_one_lsn(session: Session) -> None:
    before = rows(session, "SELECT kdb_rev('a'), kdb_rev('b')")
    assert session.execute("CALL both_(1, 2)").message == "procedure 'both_' called"
    assert rows(session, "SELECT * FROM a") == [(1, 2)]
    assert rows(session, "SELECT * FROM b") == [(1, 20)]
    lsns = rows(
        session,
        "SELECT lsn FROM changes('a') WHERE op = 'upsert' UNION ALL"
        " SELECT lsn FROM changes('b') WHERE op = 'upsert'",
    )
    assert len(lsns) == 2 and lsns[0] == lsns[1]
    after = rows(session, "SELECT kdb_rev('a'), kdb_rev('b')")
    assert after[0][0] != before[0][0] and after[0][1] != before[0][1]


def test_a_failing_call_writes_nothing_and_moves_no_revision(session: Session) -> None:
    session.execute("INSERT INTO b VALUES (1, 0)")
    before = rows(session, "SELECT kdb_rev('a')")
    with pytest.raises(DuplicateKey, match="^procedure 'both_': duplicate primary key 1"):
        session.execute("CALL both_(1, 2)")
    assert rows(session, "SELECT count(*) FROM a") == [(0,)]
    assert rows(session, "SELECT kdb_rev('a')") == before


def test_inside_a_transaction_a_call_joins_it(session: Session) -> None:
    session.execute("BEGIN; CALL both_(1, 1); CALL both_(2, 2); COMMIT")
    lsns = {row[0] for row in rows(session, "SELECT lsn FROM changes('a') WHERE op = 'upsert'")}
    assert len(lsns) == 1
    session.execute("BEGIN; CALL both_(3, 3)")
    session.execute("ROLLBACK")
    assert rows(session, "SELECT count(*) FROM a") == [(2,)]


def test_parameters_bind_by_name_and_columns_by_their_table(session: Session) -> None:
    session.execute("INSERT INTO a VALUES (1, 5), (2, 6)")
    session.execute(
        "CREATE PROCEDURE bump(v INT) BEGIN ATOMIC UPDATE a SET v = a.v + v WHERE a.v > v; END"
    )
    session.execute("CALL bump(5)")
    assert rows(session, "SELECT * FROM a ORDER BY id") == [(1, 5), (2, 11)]
    session.execute(
        "CREATE PROCEDURE twice(id INT) LANGUAGE SQL AS $$ CALL both_(id, 1);"
        " CALL both_(id + 1, 2) $$"
    )
    session.execute("CALL twice(7)")
    assert rows(session, "SELECT * FROM b WHERE id >= 7 ORDER BY id") == [(7, 10), (8, 20)]


def test_arguments_are_converted_to_the_parameters_types(session: Session) -> None:
    session.execute("CREATE TABLE e (ts TIMESTAMP, n DOUBLE) TIMESERIES(ts)")
    session.execute(
        "CREATE PROCEDURE ev(at TIMESTAMP, n DOUBLE) LANGUAGE SQL AS $$"
        " INSERT INTO e SELECT at, n WHERE at > '2026-01-01' $$"
    )
    session.execute("CALL ev('2026-03-01T00:00:00Z', 1)")
    session.execute("CALL ev(?, ?)", ("2025-03-01T00:00:00Z", 2))
    assert rows(session, "SELECT count(*), sum(n) FROM e") == [(1, 1.0)]
    with pytest.raises(SqlError, match="argument 2 \\(n DOUBLE\\) cannot take STRING"):
        session.execute("CALL ev('2026-03-01T00:00:00Z', 'x')")
    with pytest.raises(SqlError, match="takes 2 argument"):
        session.execute("CALL ev(1)")


def test_a_call_stops_at_the_statement_timeout(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data", EngineOptions(statement_timeout=0.5))
    try:
        session = instance.session()
        session.execute("CREATE TABLE a (n BIGINT)")
        session.execute(
            "CREATE PROCEDURE long_() LANGUAGE SQL AS $$ INSERT INTO a VALUES (1);"
            " INSERT INTO a WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c"
            " WHERE i < 5000) SELECT count(*) FROM c x, c y $$"
        )
        with pytest.raises(StatementTimeout):
            session.execute("CALL long_()")
        assert rows(session, "SELECT count(*) FROM a") == [(0,)]
    finally:
        instance.close()


def test_the_body_runs_with_the_callers_rights(instance: Instance, session: Session) -> None:
    session.execute("CREATE USER r; GRANT READ ON DATABASE demo TO r")
    reader = instance.session(principal=Principal("r"))
    with pytest.raises(Forbidden):
        reader.execute("CREATE PROCEDURE mine() BEGIN ATOMIC SELECT 1; END")
    with pytest.raises(Forbidden, match="^procedure 'both_'"):
        reader.execute("CALL both_(1, 1)")
    assert rows(session, "SELECT count(*) FROM a") == [(0,)]


def test_refusals(session: Session) -> None:
    with pytest.raises(RoutineExists):
        session.execute("CREATE PROCEDURE both_() BEGIN ATOMIC SELECT 1; END")
    with pytest.raises(NotAllowed, match="not DROP statements"):
        session.execute("CREATE PROCEDURE p() LANGUAGE SQL AS $$ DROP TABLE a $$")
    with pytest.raises(SqlError, match="names its parameter 'X' twice"):
        session.execute("CREATE PROCEDURE p(x INT, X INT) BEGIN ATOMIC SELECT 1; END")
    with pytest.raises(UnknownRoutine):
        session.execute("DROP PROCEDURE nope")
    with pytest.raises(SqlSyntaxError) as caught:
        session.execute("SELECT 1;\nCREATE PROCEDURE p() LANGUAGE SQL AS $$\n  SELEC 1 $$")
    assert (caught.value.line, caught.value.column) == (3, 3)


def test_procedures_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "data"
    instance = Instance.open(path)
    session = instance.session()
    for sql in TWO_TABLES:
        session.execute(sql)
    session.execute("CHECKPOINT")
    session.execute(
        "CREATE OR REPLACE PROCEDURE both_(id INT) BEGIN ATOMIC INSERT INTO a VALUES (id, 0); END"
    )
    instance.close()
    instance = Instance.open(path)
    try:
        session = instance.session()
        assert [row[:2] for row in rows(session, "SHOW PROCEDURES")] == [("both_", "id INT")]
        session.execute("CALL both_(4)")
        assert rows(session, "SELECT * FROM a") == [(4, 0)]
    finally:
        instance.close()
