"""Prepared statements run again and again: rights are checked on every run, and a schema
change between two runs gives the new answer or, when the columns the statement answers
changed, PostgreSQL's "cached plan must not change result type" (0A000). psycopg sends
DEALLOCATE ALL after an ALTER or DROP of its own and prepares again."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import pq


def test_a_revoke_between_two_runs_refuses_the_second(pg, db):
    pg.http.sql("CREATE USER IF NOT EXISTS pg_prepared_reader")
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
        conn.execute("INSERT INTO t VALUES (1, 0.5), (2, 1.5)")
    pg.http.sql(f"GRANT READ ON DATABASE {db} TO pg_prepared_reader")
    token = pg.http.new_token("pg_prepared_reader")
    with pg.connect(db, user="pg_prepared_reader", password=token, prepare_threshold=0) as conn:
        query = "SELECT v FROM t WHERE id = %s"
        assert conn.execute(query, (1,), prepare=True).fetchone() == (0.5,)
        assert conn.execute(query, (2,), prepare=True).fetchone() == (1.5,)
        pg.http.sql(f"REVOKE READ ON DATABASE {db} FROM pg_prepared_reader")
        with pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(query, (1,), prepare=True)


def test_a_schema_change_between_runs_of_psycopg_gives_the_new_answer(pg, db):
    with pg.connect(db, prepare_threshold=0) as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
        conn.execute("INSERT INTO t VALUES (1, 0.5)")
        star, some = "SELECT * FROM t WHERE id = %s", "SELECT id, v FROM t WHERE id = %s"
        assert conn.execute(star, (1,), prepare=True).fetchone() == (1, 0.5)
        assert conn.execute(some, (1,), prepare=True).fetchone() == (1, 0.5)
        conn.execute("ALTER TABLE t ADD COLUMN s STRING")
        conn.execute("UPDATE t SET v = 2.5 WHERE id = 1")
        assert conn.execute(some, (1,), prepare=True).fetchone() == (1, 2.5)
        assert conn.execute(star, (1,), prepare=True).fetchone() == (1, 2.5, None)
        conn.execute("DROP TABLE t")
        with pytest.raises(pgerrors.UndefinedTable):
            conn.execute(some, (1,), prepare=True)
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
        conn.execute("INSERT INTO t VALUES (1, 7.5)")
        assert conn.execute(some, (1,), prepare=True).fetchone() == (1, 7.5)


def _prepare_star(conn: psycopg.Connection) -> pq.abc.PGconn:
    """Table t (id, v) with a row, and `star` prepared and described: its two columns told."""
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
    conn.execute("INSERT INTO t VALUES (1, 0.5)")
    pgconn = conn.pgconn
    assert pgconn.prepare(b"star", b"SELECT * FROM t WHERE id = $1").status == 1
    assert pgconn.describe_prepared(b"star").nfields == 2
    return pgconn


def test_a_schema_change_that_changes_a_prepared_statements_columns_refuses_it(pg, db):
    with pg.connect(db) as conn:
        pgconn = _prepare_star(conn)
        assert pgconn.exec_prepared(b"star", [b"1"]).get_value(0, 1) == b"0.5"
        assert pgconn.prepare(b"some", b"SELECT id FROM t WHERE id = $1").status == 1
        assert pgconn.exec_prepared(b"some", [b"1"]).get_value(0, 0) == b"1"
        pg.http.sql("ALTER TABLE t ADD COLUMN s STRING", db)
        refused = pgconn.exec_prepared(b"star", [b"1"])
        assert refused.error_field(ord("C")) == b"0A000"
        assert b"cached plan must not change result type" in refused.error_message
        assert pgconn.exec_prepared(b"some", [b"1"]).get_value(0, 0) == b"1"
        assert conn.execute("DEALLOCATE star").statusmessage == "DEALLOCATE"
        with pytest.raises(pgerrors.InvalidSqlStatementName):
            conn.execute("DEALLOCATE star")
        assert conn.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
        assert pgconn.exec_prepared(b"some", [b"1"]).error_field(ord("C")) == b"26000"


def test_the_columns_a_describe_told_are_the_ones_a_later_run_must_answer(pg, db):
    # A client that read the columns at Describe decodes the first run by them: a schema
    # change between the two refuses that run, as one between two runs does.
    with pg.connect(db) as conn:
        pgconn = _prepare_star(conn)
        pg.http.sql("ALTER TABLE t ADD COLUMN s STRING", db)
        refused = pgconn.exec_prepared(b"star", [b"1"])
        assert refused.error_field(ord("C")) == b"0A000"
        assert pgconn.prepare(b"fresh", b"SELECT * FROM t WHERE id = $1").status == 1
        assert pgconn.exec_prepared(b"fresh", [b"1"]).nfields == 3


def test_a_parameter_of_no_type_reads_as_its_place_types_it_once_described(pg, db):
    # The first Bind sends NULL: nothing infers the parameter's type yet. A Describe then
    # does (a BIGINT key), and later Binds read their text as an integer (and refuse what
    # is none) rather than as the text the first Bind would have read it as.
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
        conn.execute("INSERT INTO t VALUES (1, 0.5)")
        pgconn = conn.pgconn
        assert pgconn.prepare(b"by_id", b"SELECT v FROM t WHERE id = $1").status == 1
        first = pgconn.exec_prepared(b"by_id", [None])
        assert first.status == pq.ExecStatus.TUPLES_OK and first.ntuples == 0
        described = pgconn.describe_prepared(b"by_id")
        assert described.nparams == 1 and described.param_type(0) == 20  # int8
        found = pgconn.exec_prepared(b"by_id", [b"1"])
        assert found.status == pq.ExecStatus.TUPLES_OK, found.error_message
        assert found.ntuples == 1 and found.get_value(0, 0) == b"0.5"
        refused = pgconn.exec_prepared(b"by_id", [b"one"])
        assert refused.status == pq.ExecStatus.FATAL_ERROR
        assert b"parameter $1 is not a valid BIGINT" in refused.error_message
