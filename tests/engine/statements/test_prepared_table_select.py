"""A prepared SELECT of one table (`PreparedTableSelect`) reads by the key without the
state lock outside a transaction; it still answers what `execute` answers whatever the
name comes to stand for, inside a transaction too, and checks the right first."""

from __future__ import annotations

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.errors import Forbidden, UnknownTable

POINT = "SELECT * FROM t WHERE id = ?"


@pytest.fixture
def session(instance: Instance) -> Session:
    admin = instance.session()
    admin.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    admin.execute("INSERT INTO t VALUES (1, 0.5, 'a'), (2, 1.5, 'b')")
    return admin


def test_a_transaction_reads_its_own_rows(session: Session) -> None:
    prepared = session.prepare(POINT)
    assert prepared is not None
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (5, 2.5, 'e')")
    session.execute("DELETE FROM t WHERE id = 1")
    assert session.run_prepared(prepared, (5,)).rows == [(5, 2.5, "e")]
    assert session.run_prepared(prepared, (1,)).rows == []
    session.execute("ROLLBACK")
    assert session.run_prepared(prepared, (5,)).rows == []
    assert session.run_prepared(prepared, (1,)).rows == [(1, 0.5, "a")]


def test_the_name_becomes_a_view_and_a_table_again(session: Session) -> None:
    prepared = session.prepare(POINT)
    assert prepared is not None
    assert session.run_prepared(prepared, (2,)).rows == [(2, 1.5, "b")]
    session.execute("DROP TABLE t")
    with pytest.raises(UnknownTable):
        session.run_prepared(prepared, (2,))
    session.execute("CREATE TABLE u (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("INSERT INTO u VALUES (2, 9.5, 'view')")
    session.execute("CREATE VIEW t AS SELECT id, v, s FROM u")
    assert session.run_prepared(prepared, (2,)).rows == [(2, 9.5, "view")]
    session.execute("DROP VIEW t")
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("INSERT INTO t VALUES (2, 0.0, 'table')")
    assert session.run_prepared(prepared, (2,)).rows == [(2, 0.0, "table")]


def test_a_catalog_name_is_the_catalogs_until_a_table_takes_it(session: Session) -> None:
    text = "SELECT * FROM pg_class WHERE relname = ?"
    prepared = session.prepare(text)
    assert prepared is not None
    catalog = session.execute(text, ("t",))
    assert len(catalog.columns or []) > 2 and len(catalog.rows) == 1
    assert session.run_prepared(prepared, ("t",)).rows == catalog.rows
    session.execute("CREATE TABLE pg_class (relname STRING PRIMARY KEY, n INT)")
    session.execute("INSERT INTO pg_class VALUES ('t', 7)")
    assert session.run_prepared(prepared, ("t",)).rows == [("t", 7)]
    assert session.execute(text, ("t",)).rows == [("t", 7)]


def test_the_right_is_checked_before_the_table_is_looked_up(
    instance: Instance, session: Session
) -> None:
    session.execute("CREATE USER bob")
    bob = instance.session(principal=Principal("bob", False))
    for text in (POINT, "SELECT * FROM nowhere WHERE id = ?"):
        prepared = bob.prepare(text)
        assert prepared is not None
        with pytest.raises(Forbidden):
            bob.run_prepared(prepared, (1,))
    session.execute("GRANT SELECT ON t TO bob")
    prepared = bob.prepare(POINT)
    assert prepared is not None
    assert bob.run_prepared(prepared, (1,)).rows == [(1, 0.5, "a")]
    session.execute("REVOKE SELECT ON t FROM bob")
    with pytest.raises(Forbidden):
        bob.run_prepared(prepared, (1,))
