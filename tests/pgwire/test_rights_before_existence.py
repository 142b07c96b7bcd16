"""Rights before existence over the protocol: a login needs a right in its database, the
answer for a missing database and for a forbidden one is the same, every statement needs
the right still, and pg_database shows only the databases the reader holds a right in."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hypothesis_settings import OVER_FIXTURE
from tests.pgwire.attack import refused_login
from tests.pgwire.conftest import PgServer


def _user(pg: PgServer, *grants: str) -> tuple[str, str]:
    """A new user with these grants (`{u}` stands for its name); its name and a token."""
    name = "u_" + uuid.uuid4().hex[:10]
    pg.http.sql(f"CREATE USER {name}")
    for grant in grants:
        pg.http.sql(grant.format(u=name))
    return name, pg.http.new_token(name)


def test_a_missing_database_and_a_forbidden_one_answer_alike(pg, db):
    user, token = _user(pg)  # no right anywhere
    missing = "t_" + uuid.uuid4().hex[:12]
    forbidden = refused_login(pg, user, token, db)
    absent = refused_login(pg, user, token, missing)
    assert forbidden["C"] == absent["C"] == "42501"
    assert forbidden["M"] == absent["M"].replace(missing, db)
    assert f"lacks READ on database '{db}'" in forbidden["M"]


def test_an_admin_and_a_user_with_a_right_log_in(pg, db):
    missing = "t_" + uuid.uuid4().hex[:12]
    # The admin may know which databases exist.
    assert refused_login(pg, "admin", pg.token, missing)["C"] == "3D000"
    pg.http.sql("CREATE TABLE t (id INT)", db)
    user, token = _user(pg)
    pg.http.sql(f"GRANT SELECT ON t TO {user}", db)  # a right on one table is a right in db
    with pg.connect(dbname=db, user=user, password=token) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_revoke_reaches_an_open_connection(pg, db):
    user, token = _user(pg, f"GRANT READ ON DATABASE {db} TO {{u}}")
    with pg.connect(dbname=db, user=user, password=token) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute(f"SHOW GRANTS FOR {user}").fetchall()
        pg.http.sql(f"REVOKE READ ON DATABASE {db} FROM {user}", db)
        for sql in ("SELECT 1", f"SHOW GRANTS FOR {user}", "SELECT datname FROM pg_database"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="lacks READ"):
                conn.execute(sql)
        pg.http.sql(f"GRANT READ ON DATABASE {db} TO {user}", db)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection stayed usable


def test_pg_database_lists_only_what_the_reader_holds_a_right_in(pg, db):
    other = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {other}")
    user, token = _user(pg, f"GRANT READ ON DATABASE {db} TO {{u}}")
    listing = "SELECT datname FROM pg_database ORDER BY datname"
    with pg.connect(dbname=db, user=user, password=token) as conn:
        assert conn.execute(listing).fetchall() == [(db,)]
    assert pg.http.rows(listing, db, token=token) == [[db]]  # the engine's catalog: HTTP too
    with pg.connect(dbname=db) as admin:
        names = {row[0] for row in admin.execute(listing).fetchall()}
    assert {db, other, "demo"} <= names


@pytest.fixture(scope="module")
def two_databases(pg: PgServer) -> tuple[str, str]:
    """Database `a` with tables t1 and t2, and `b` with a table of its own; their names."""
    a, b = ("t_" + uuid.uuid4().hex[:12] for _ in range(2))
    for name in (a, b):
        pg.http.sql(f"CREATE DATABASE {name}")
    for table, values in TABLES.items():
        pg.http.sql(f"CREATE TABLE {table} (v INT)", a)
        pg.http.sql(f"INSERT INTO {table} VALUES {', '.join(f'({v})' for v in values)}", a)
    pg.http.sql("CREATE TABLE secret_of_b (v INT)", b)
    pg.http.sql("INSERT INTO secret_of_b VALUES (99)", b)
    return a, b


TABLES = {"t1": [1, 2], "t2": [3]}
CHANGES = [
    "GRANT READ ON DATABASE {a} TO {u}",
    "REVOKE READ ON DATABASE {a} FROM {u}",
    *(f"GRANT SELECT ON {t} TO {{u}}" for t in TABLES),
    *(f"REVOKE SELECT ON {t} FROM {{u}}" for t in TABLES),
]


@settings(OVER_FIXTURE, max_examples=15)
@given(changes=st.lists(st.sampled_from(CHANGES), max_size=6))
def test_an_open_session_sees_only_what_its_rights_cover(pg, two_databases, changes):
    a, b = two_databases
    user, token = _user(pg, f"GRANT READ ON DATABASE {a} TO {{u}}")
    role_read, tables = True, dict.fromkeys(TABLES, "")  # the model: "", SELECT or DENY
    with pg.connect(dbname=a, user=user, password=token) as conn:
        for change in [None, *changes]:
            if change is not None:  # made by the admin while the session stays open
                pg.http.sql(change.format(a=a, u=user), a)
                verb, _, what = change.partition(" ")
                granting = verb == "GRANT"
                if "DATABASE" in what:
                    role_read = granting
                else:
                    tables[what.split()[2]] = "SELECT" if granting else "DENY"
            any_right = role_read or "SELECT" in tables.values()
            _sees(conn, "SELECT datname FROM pg_database", [(a,)] if any_right else None)
            _sees(conn, "SELECT 1", [(1,)] if any_right else None)
            for table, values in TABLES.items():
                readable = tables[table] == "SELECT" or (role_read and tables[table] != "DENY")
                rows = [(v,) for v in values] if any_right and readable else None
                _sees(conn, f"SELECT v FROM {table} ORDER BY v", rows)
            shown = _sees(conn, "SHOW TABLES", ... if any_right else None)
            assert shown is None or {row[0] for row in shown} <= set(TABLES), shown


def _sees(conn: psycopg.Connection, sql: str, expected: object) -> list[tuple] | None:
    """The rows `sql` answers, which must be `expected` (... any), or, with None expected,
    a refusal for want of a right."""
    if expected is None:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql)
        return None
    rows = conn.execute(sql).fetchall()
    assert expected is ... or rows == expected, (sql, rows)
    return rows
