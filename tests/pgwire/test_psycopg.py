"""psycopg 3 against the server's PostgreSQL port: both protocols, parameters, every type
in text and binary, transactions (a failed one too), errors with SQLSTATE, a cancel."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import errors as pgerrors

from tests.hypothesis_settings import OVER_FIXTURE

CREATE = (
    "CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE, name STRING, sym SYMBOL,"
    " b BOOLEAN, ts TIMESTAMP)"
)
ROW = (1, 2**40, 1.5, "a 'quoted' é", "s1", True, datetime(2026, 9, 24, 10, 0, 0, 500000, UTC))


def test_simple_protocol_answers_each_statement_with_postgres_tags(pg, db):
    with pg.connect(db) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute(CREATE)
        assert cur.statusmessage == "CREATE TABLE"
        cur.execute("INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b')")
        assert cur.statusmessage == "INSERT 0 2"
        cur.execute("UPDATE t SET name = 'c' WHERE id = 2")
        assert cur.statusmessage == "UPDATE 1"
        # Several statements in one Query message: each is answered in turn.
        cur.execute("INSERT INTO t (id) VALUES (3); SELECT id FROM t ORDER BY id")
        assert cur.statusmessage == "INSERT 0 1"
        assert cur.nextset()
        assert cur.fetchall() == [(1,), (2,), (3,)]
        assert cur.statusmessage == "SELECT 3"
        cur.execute("DELETE FROM t WHERE id > 1")
        assert cur.statusmessage == "DELETE 2"


def test_server_side_parameters_and_every_type_in_text_and_binary(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        conn.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s)", ROW)
        conn.execute("INSERT INTO t (id) VALUES (%s)", (2,))
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            cur.execute("SELECT id, big, x, name, sym, b, ts FROM t WHERE id = %s", (1,))
            assert cur.fetchone() == ROW
            assert [c.type_code for c in cur.description] == [23, 20, 701, 25, 25, 16, 1184]
            cur.execute("SELECT id, big, x, name, sym, b, ts FROM t WHERE id = %s", (2,))
            assert cur.fetchone() == (2, None, None, None, None, None, None)


def test_prepared_statements_are_reused(pg, db):
    with pg.connect(db, prepare_threshold=0) as conn:
        conn.execute(CREATE)
        for n in range(5):
            conn.execute("INSERT INTO t (id, name) VALUES (%s, %s)", (n, f"n{n}"))
        rows = [conn.execute("SELECT name FROM t WHERE id = %s", (n,)).fetchone() for n in range(5)]
        assert rows == [(f"n{n}",) for n in range(5)]


def test_transactions_commit_and_roll_back(pg, db):
    with pg.connect(db, autocommit=False) as conn:
        conn.execute(CREATE)
        conn.commit()
        conn.execute("INSERT INTO t (id) VALUES (1)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        conn.execute("INSERT INTO t (id) VALUES (2)")
        conn.commit()
        assert conn.execute("SELECT id FROM t").fetchall() == [(2,)]


def test_a_failed_transaction_refuses_statements_until_rollback(pg, db):
    with pg.connect(db, autocommit=False) as conn:
        conn.execute(CREATE)
        conn.commit()
        conn.execute("INSERT INTO t (id) VALUES (1)")
        with pytest.raises(pgerrors.UniqueViolation) as caught:
            conn.execute("INSERT INTO t (id) VALUES (1)")
        assert caught.value.sqlstate == "23505"
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(pgerrors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize(
    ("sql", "error", "code"),
    [
        ("SELEC 1", pgerrors.SyntaxError, "42601"),
        ("SELECT * FROM nowhere", pgerrors.UndefinedTable, "42P01"),
        ("SELECT nope FROM t", pgerrors.UndefinedColumn, "42703"),
        ("SUBSCRIBE SELECT * FROM t", pgerrors.FeatureNotSupported, "0A000"),
    ],
)
def test_errors_carry_their_sqlstate_and_the_exec_message(pg, db, sql, error, code):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        expected = pg.http.exec(sql, db).json()["error"] if code != "0A000" else "/api/subscribe"
        with pytest.raises(error) as caught:
            conn.execute(sql)
    assert caught.value.sqlstate == code
    assert expected in str(caught.value)


def test_a_syntax_error_gives_its_position(pg, db):
    with pg.connect(db) as conn, pytest.raises(pgerrors.SyntaxError) as caught:
        conn.execute("SELECT 1;\nSELECT 1 +* 2")
    assert caught.value.diag.statement_position == "21"


def test_a_user_token_logs_in_and_rights_hold(pg, db):
    pg.http.sql("CREATE USER IF NOT EXISTS pg_reader")
    pg.http.sql(f"GRANT READ ON DATABASE {db} TO pg_reader")
    token = pg.http.new_token("pg_reader")
    with pg.connect(db) as conn:
        conn.execute(CREATE)
    with pg.connect(db, user="pg_reader", password=token) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        with pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute("INSERT INTO t (id) VALUES (1)")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pg.connect(db, user="pg_reader", password="kdb_wrong")
    with pytest.raises(psycopg.OperationalError, match="belongs to user 'pg_reader'"):
        pg.connect(db, user="admin", password=token)
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        pg.connect("no_such_db")


def test_kdb_rev_and_changes_answer_as_over_exec(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        conn.execute("INSERT INTO t (id, name) VALUES (1, 'a')")
        rev = conn.execute("SELECT kdb_rev('t')").fetchone()[0]
        assert str(rev) == str(pg.http.rows("SELECT kdb_rev('t')", db)[0][0])
        rows = conn.execute("SELECT * FROM changes('t')").fetchall()
        assert len(rows) == len(pg.http.rows("SELECT * FROM changes('t')", db)) == 2


def test_session_settings_set_and_show(pg, db):
    with pg.connect(db) as conn:
        assert conn.info.parameter_status("server_version") == "15.0"
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        conn.execute("SET application_name = 'mine'")
        assert conn.info.parameter_status("application_name") == "mine"
        assert conn.execute("SHOW application_name").fetchone() == ("mine",)
        with pytest.raises(pgerrors.UndefinedObject):
            conn.execute("SHOW no_such_setting")


def test_a_cancel_stops_a_running_statement(pg, db):
    rows = "id,name\n" + "\n".join(f"{n},name{n}" for n in range(300_000))
    pg.http.sql("CREATE TABLE big (id INT, name STRING)", db)
    answer = pg.http.post("/imp", params={"db": db, "table": "big"}, data=rows.encode())
    assert answer.status_code == 200, answer.text
    with pg.connect(db) as conn:
        timer = threading.Timer(0.3, conn.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(pgerrors.QueryCanceled):
            conn.execute(
                "SELECT count(*) FROM big a WHERE a.name LIKE '%x%y%z%'"
                " OR a.name LIKE '%q%r%' OR a.id * 3 = -1"
            )
        timer.join()
        assert time.monotonic() - started < 10
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


def test_if_not_exists_that_does_nothing_sends_a_notice(pg, db):
    with pg.connect(db) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute(CREATE.replace("TABLE t", "TABLE IF NOT EXISTS t"))
        conn.execute(CREATE.replace("TABLE t", "TABLE IF NOT EXISTS t"))
        conn.execute("DROP TABLE IF EXISTS nowhere")
    assert notices == [
        "table 't' already exists, skipping",
        "table 'nowhere' does not exist, skipping",
    ]


def test_unknown_and_duplicate_names_of_statements_and_portals(pg, db):
    with pg.connect(db) as conn:
        pgconn = conn.pgconn
        missing = pgconn.describe_prepared(b"nope")
        assert missing.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"26000"
        assert pgconn.prepare(b"one", b"SELECT 1").status == psycopg.pq.ExecStatus.COMMAND_OK
        again = pgconn.prepare(b"one", b"SELECT 2")
        assert again.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"42P05"
        assert (
            pgconn.describe_portal(b"nope").error_field(psycopg.pq.DiagnosticField.SQLSTATE)
            == b"34000"
        )
        assert pgconn.exec_prepared(b"one", []).get_value(0, 0) == b"1"


# Written into the text, a constant makes a new text for each row, read (as over /exec) as
# the one parse of its template: the answers are those of the same values as parameters.
@settings(OVER_FIXTURE, max_examples=25)
@given(key=st.integers(-(2**31), 2**31 - 1), text=st.text(alphabet="ab 'é\\%?$;-", max_size=12))
def test_constants_in_the_text_answer_as_parameters_do(pg, db, key, text):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kv (k INT PRIMARY KEY, v STRING)")
        literal = psycopg.ClientCursor(conn)  # binds on the client: one simple Query
        literal.execute("INSERT INTO kv VALUES (%s, %s)", (key, text))
        assert literal.statusmessage == "INSERT 0 1"
        literal.execute("SELECT k, v FROM kv WHERE k = %s", (key,))
        assert literal.fetchall() == [(key, text)]
        assert conn.execute("SELECT k, v FROM kv WHERE k = %s", (key,)).fetchall() == [(key, text)]
        # Parsed, described and executed through the extended protocol, without parameters.
        cur = conn.execute(f"SELECT v AS value FROM kv WHERE k = {key}", prepare=True)
        assert [c.name for c in cur.description] == ["value"]
        assert cur.fetchall() == [(text,)]
        literal.execute("DELETE FROM kv WHERE k = %s", (key,))
        assert literal.statusmessage == "DELETE 1"
