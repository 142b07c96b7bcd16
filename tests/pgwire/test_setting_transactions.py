"""SET inside a transaction, as PostgreSQL keeps it (spec/pgwire.md, "Session settings"):
undone when the transaction rolls back (the client told the value back by ParameterStatus),
kept when it commits; SET LOCAL lasts until the transaction ends, and outside one changes
nothing. tests/differential/test_setting_rollback.py compares the same with PostgreSQL 15."""

from __future__ import annotations

import psycopg
import pytest

from tests.pgwire.conftest import PgServer


def shown(conn: psycopg.Connection, name: str) -> str:
    (value,) = conn.execute(f"SHOW {name}").fetchone()  # type: ignore[misc]
    return str(value)


def test_a_rollback_undoes_a_set_and_tells_the_client(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        conn.execute("SET application_name = 'before'")
        conn.execute("BEGIN")
        conn.execute("SET application_name = 'inside'")
        conn.execute("SET lock_timeout = '3s'")
        assert conn.info.parameter_status("application_name") == "inside"
        conn.execute("ROLLBACK")
        assert shown(conn, "application_name") == "before"
        assert shown(conn, "lock_timeout") == "0"
        assert conn.info.parameter_status("application_name") == "before"


def test_a_commit_keeps_a_set_but_not_a_set_local(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        conn.execute("BEGIN")
        conn.execute("SET lock_timeout = 1000")
        conn.execute("SET LOCAL lock_timeout = '2s'")
        conn.execute("SET LOCAL application_name = 'local'")
        assert (shown(conn, "lock_timeout"), shown(conn, "application_name")) == ("2s", "local")
        conn.execute("COMMIT")
        assert (shown(conn, "lock_timeout"), shown(conn, "application_name")) == ("1s", "")
        assert conn.info.parameter_status("application_name") == ""


def test_set_local_outside_a_transaction_changes_nothing(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        conn.execute("SET LOCAL lock_timeout = '2s'")
        assert shown(conn, "lock_timeout") == "0"


def test_an_error_in_a_text_undoes_its_set(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SET application_name = 'text'; SELECT nope")
        assert shown(conn, "application_name") == ""
        conn.execute("SET application_name = 'text'; SELECT 1")
        assert shown(conn, "application_name") == "text"


def test_a_failed_transaction_ended_by_commit_undoes_its_set(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        conn.execute("BEGIN")
        conn.execute("SET lock_timeout = 7")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SELECT nope")
        conn.execute("COMMIT")  # answered ROLLBACK
        assert shown(conn, "lock_timeout") == "0"
