"""A prepared run (`Session.prepare`, `run_prepared`) answers what `execute` answers for the
same text and parameters, errors included, and checks rights at every run."""

from __future__ import annotations

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.errors import (
    DuplicateKey,
    FailedTransaction,
    Forbidden,
    KdbError,
    ParameterError,
    StatementTooLarge,
)


@pytest.fixture
def session(instance: Instance) -> Session:
    admin = instance.session()
    admin.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    admin.execute("INSERT INTO t VALUES (1, 0.5, 'a'), (2, 1.5, 'b'), (3, 2.5, 'c')")
    return admin


def outcome(run: object) -> object:
    try:
        result = run()  # type: ignore[operator]
    except KdbError as error:
        return type(error).__name__, error.message
    columns = None if result.columns is None else [(c.name, c.type) for c in result.columns]
    return columns, result.rows, result.message, result.count, result.statements


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT * FROM t WHERE id = ?", (2,)),
        ("SELECT * FROM t WHERE id = ?", (9,)),
        ("SELECT * FROM t WHERE id = ?", ("2",)),  # not the key's type: the general path
        ("SELECT s, v FROM t WHERE v > ? ORDER BY v DESC", (1.0,)),
        ("SELECT count(*) FROM t WHERE id IN (SELECT id FROM t WHERE v < ?)", (2.0,)),
        ("SELECT * FROM t WHERE id = ?", ()),  # too few parameters
        ("SELECT * FROM nowhere WHERE id = ?", (1,)),
        ("INSERT INTO t VALUES (?, ?, ?)", (2, 0.0, "dup")),
        ("UPDATE t SET v = v + ? WHERE id = ?", (1.0, 3)),
        ("DELETE FROM t WHERE id = ?", (1,)),
    ],
)
def test_answers_as_execute(instance: Instance, session: Session, sql: str, params: tuple) -> None:
    other = instance.session()
    prepared = session.prepare(sql)
    assert prepared is not None
    expected = outcome(lambda: other.execute(sql, params))
    other.execute("DELETE FROM t")
    other.execute("INSERT INTO t VALUES (1, 0.5, 'a'), (2, 1.5, 'b'), (3, 2.5, 'c')")
    assert outcome(lambda: session.run_prepared(prepared, params)) == expected


def test_rights_are_checked_at_every_run(instance: Instance, session: Session) -> None:
    session.execute("CREATE USER bob")
    session.execute("GRANT SELECT ON t TO bob")
    bob = instance.session(principal=Principal("bob", False))
    select = bob.prepare("SELECT * FROM t WHERE id = ?")
    insert = bob.prepare("INSERT INTO t VALUES (?, ?, ?)")
    assert select is not None and insert is not None
    assert bob.run_prepared(select, (1,)).rows == [(1, 0.5, "a")]
    with pytest.raises(Forbidden):
        bob.run_prepared(insert, (7, 0.0, "x"))
    session.execute("REVOKE SELECT ON t FROM bob")
    with pytest.raises(Forbidden):
        bob.run_prepared(select, (1,))
    assert session.execute("SELECT count(*) FROM t").rows == [(3,)]


def test_a_schema_change_makes_a_new_point_plan(session: Session) -> None:
    prepared = session.prepare("SELECT * FROM t WHERE id = ?")
    assert prepared is not None
    assert session.run_prepared(prepared, (1,)).rows == [(1, 0.5, "a")]
    session.execute("ALTER TABLE t ADD COLUMN n INT")
    result = session.run_prepared(prepared, (1,))
    assert [c.name for c in result.columns or []] == ["id", "v", "s", "n"]
    assert result.rows == [(1, 0.5, "a", None)]
    session.execute("CREATE VIEW t2 AS SELECT id FROM t")
    view = session.prepare("SELECT * FROM t2 WHERE id = ?")
    assert view is not None
    assert session.run_prepared(view, (2,)).rows == [(2,)]


def test_a_failed_statement_in_a_transaction_fails_it(instance: Instance) -> None:
    session = instance.session()
    session.keeps_failed = True  # as the PostgreSQL protocol's sessions
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    insert = session.prepare("INSERT INTO t VALUES (?)")
    assert insert is not None
    session.execute("BEGIN")
    session.run_prepared(insert, (1,))
    with pytest.raises(DuplicateKey):
        session.run_prepared(insert, (1,))
    assert session.failed
    with pytest.raises(FailedTransaction):
        session.run_prepared(insert, (2,))
    session.execute("ROLLBACK")
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]
    with pytest.raises(ParameterError):
        session.run_prepared(insert, (1, 2))


def test_what_is_not_prepared(session: Session) -> None:
    assert session.prepare("SELECT 1; SELECT 2") is None  # two statements
    limit = session.database.options.max_sql_bytes
    long_text = "SELECT * FROM t WHERE s = '" + "x" * limit + "'"
    assert session.prepare(long_text) is None
    with pytest.raises(StatementTooLarge):
        session.execute(long_text)


def test_execute_shares_a_selects_handler_through_schema_changes(
    instance: Instance, session: Session
) -> None:
    other = instance.session()
    assert other.execute("SELECT * FROM t WHERE id = 2").rows == [(2, 1.5, "b")]
    session.execute("ALTER TABLE t ADD COLUMN n INT")
    result = other.execute("SELECT * FROM t WHERE id = 3")
    assert [c.name for c in result.columns or []] == ["id", "v", "s", "n"]
    assert result.rows == [(3, 2.5, "c", None)]
    session.execute("DROP TABLE t")
    session.execute("CREATE TABLE u (id BIGINT PRIMARY KEY)")
    session.execute("CREATE VIEW t AS SELECT id FROM u")
    session.execute("INSERT INTO u VALUES (1)")
    assert other.execute("SELECT * FROM t WHERE id = 1").rows == [(1,)]  # now a view
