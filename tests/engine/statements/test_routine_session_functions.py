"""The session's functions inside triggers and procedures (spec/sql.md, "Value functions";
spec/sources.md): resolved alike in a body's SELECT, VALUES, SET and WHERE. A trigger runs
as its definer, so current_user (and user, current_role) is the definer there, and
session_user is the user whose statement fired it, as in PostgreSQL's SECURITY DEFINER
functions; a procedure runs as its caller, who is both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session


@pytest.fixture
def admin(instance: Instance) -> Iterator[Session]:
    opened = instance.session("demo", Principal("admin", is_admin=True))
    opened.execute(
        "CREATE TABLE t (id INT); CREATE TABLE audit (id INT, definer STRING, fired_by STRING,"
        " also STRING); CREATE USER w; GRANT WRITE ON DATABASE demo TO w"
    )
    yield opened
    opened.close()


@pytest.fixture
def writer(instance: Instance, admin: Session) -> Iterator[Session]:
    opened = instance.session("demo", Principal("w"))
    yield opened
    opened.close()


def audited(admin: Session) -> list[tuple[object, ...]]:
    """The audit table's rows by id: who each routine ran as, and who fired it."""
    return admin.execute("SELECT id, definer, fired_by, also FROM audit ORDER BY id").rows


def test_values_where_and_select_of_a_trigger_read_the_same_users(admin, writer):
    admin.execute(
        "CREATE TRIGGER a AFTER INSERT ON t BEGIN"
        " INSERT INTO audit VALUES (NEW.id, current_user, session_user, user);"
        " UPDATE audit SET also = current_role WHERE definer = current_user()"
        " AND fired_by = session_user AND id = NEW.id;"
        " INSERT INTO audit SELECT NEW.id + 100, current_user, session_user, user;"
        " INSERT INTO audit SELECT NEW.id + 200, current_user, session_user, 'x' FROM t"
        " WHERE id = NEW.id AND current_user = 'admin';"
        " END"
    )
    writer.execute("INSERT INTO t VALUES (1)")
    assert audited(admin) == [
        (1, "admin", "w", "admin"),
        (101, "admin", "w", "admin"),
        (201, "admin", "w", "x"),
    ]


def test_a_trigger_of_another_definer_runs_as_that_definer(instance, admin, writer):
    admin.execute("CREATE USER d; GRANT ADMIN ON DATABASE demo TO d")
    admin.execute(
        "CREATE DEFINER = d TRIGGER a BEFORE INSERT ON t BEGIN"
        " INSERT INTO audit VALUES (NEW.id, current_user, session_user, current_catalog); END"
    )
    writer.execute("INSERT INTO t VALUES (1)")
    admin.execute("INSERT INTO t VALUES (2)")
    assert audited(admin) == [(1, "d", "w", "demo"), (2, "d", "admin", "demo")]


def test_a_procedure_runs_as_its_caller(admin, writer):
    admin.execute(
        "CREATE PROCEDURE p(n INT) LANGUAGE SQL AS $$"
        " INSERT INTO audit VALUES (n, current_user, session_user, user);"
        " UPDATE audit SET also = 'seen' WHERE definer = current_user AND id = n $$"
    )
    writer.execute("CALL p(1)")
    admin.execute("CALL p(2)")
    assert audited(admin) == [(1, "w", "w", "seen"), (2, "admin", "admin", "seen")]
