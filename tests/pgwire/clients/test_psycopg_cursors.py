"""psycopg 3's named (server-side) cursors and nested transactions against a real server:
DECLARE, FETCH, MOVE and CLOSE as `conn.cursor(name=...)` sends them, WITH HOLD, and
`conn.transaction()` blocks inside each other (SAVEPOINT, RELEASE, ROLLBACK TO), including
an error inside one, which leaves the transaction failed until ROLLBACK TO resumes it."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerrors

from tests.pgwire.clients.capture import normalised, record, relay
from tests.pgwire.conftest import PgServer


def _fill(pg: PgServer, db: str, rows: int = 10) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db)
    values = ", ".join(f"({n}, 'n{n}')" for n in range(1, rows + 1))
    pg.http.sql(f"INSERT INTO t VALUES {values}", db)


def test_a_named_cursor_fetches_in_parts_scrolls_and_closes(pg: PgServer, db: str) -> None:
    _fill(pg, db)
    with relay(pg.host, pg.port) as captured:
        with psycopg.connect(
            host=pg.host, port=captured.port, user="admin", password=pg.token, dbname=db
        ) as conn:
            with conn.cursor(name="reader", scrollable=True) as cur:
                cur.execute("SELECT id, name FROM t WHERE id > %s ORDER BY id", (2,))
                assert [d.name for d in cur.description or ()] == ["id", "name"]
                assert cur.fetchone() == (3, "n3")
                assert cur.fetchmany(3) == [(4, "n4"), (5, "n5"), (6, "n6")]
                cur.scroll(-2)  # MOVE BACKWARD: back onto row 4
                assert cur.fetchone() == (5, "n5")
                cur.scroll(0, mode="absolute")
                assert cur.fetchone() == (3, "n3")
                assert cur.fetchall() == [(n, f"n{n}") for n in range(4, 11)]
                assert cur.fetchone() is None
            # The cursor is closed with the block: a FETCH from it is 34000.
            with pytest.raises(pgerrors.InvalidCursorName):
                conn.execute('FETCH FORWARD 1 FROM "reader"')
            conn.rollback()
        record("psycopg-cursors", normalised(captured.statements, {db: "DB"}))


def test_a_cursor_reads_the_rows_of_its_declare(pg: PgServer, db: str) -> None:
    _fill(pg, db, 3)
    with pg.connect(db, autocommit=False) as conn, pg.connect(db) as other:
        cur = conn.cursor(name="snap")
        cur.itersize = 2
        cur.execute("SELECT id FROM t ORDER BY id")
        assert cur.fetchone() == (1,)
        conn.commit()  # a cursor without HOLD ends with its transaction
        other.execute("INSERT INTO t VALUES (4, 'n4')")
        with pytest.raises(pgerrors.InvalidCursorName):
            cur.fetchone()
        conn.rollback()
        with conn.cursor(name="held", withhold=True) as held:
            held.execute("SELECT id FROM t ORDER BY id")
            conn.commit()  # WITH HOLD: the cursor outlives the commit
            other.execute("INSERT INTO t VALUES (5, 'n5')")
            # The rows of its DECLARE: 5, written after it, is not among them.
            assert [r[0] for r in held] == [1, 2, 3, 4]


def test_a_cursor_outside_a_transaction_needs_with_hold(pg: PgServer, db: str) -> None:
    _fill(pg, db, 2)
    with pg.connect(db) as conn:  # autocommit
        with pytest.raises(pgerrors.NoActiveSqlTransaction):  # 25P01, as PostgreSQL
            conn.execute("DECLARE c CURSOR FOR SELECT id FROM t")
        conn.execute("DECLARE c CURSOR WITH HOLD FOR SELECT id FROM t ORDER BY id")
        cur = conn.execute("FETCH ALL FROM c")
        assert cur.fetchall() == [(1,), (2,)] and cur.statusmessage == "FETCH 2"
        assert conn.execute("MOVE BACKWARD ALL IN c").statusmessage == "MOVE 2"
        assert conn.execute("FETCH NEXT FROM c").fetchall() == [(1,)]
        assert conn.execute("CLOSE c").statusmessage == "CLOSE CURSOR"


def test_nested_transactions_roll_back_only_their_own_part(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    with pg.connect(db) as conn:
        with conn.transaction():
            conn.execute("INSERT INTO t VALUES (1)")
            with conn.transaction():
                conn.execute("INSERT INTO t VALUES (2)")
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (3)")
                    raise psycopg.Rollback()  # leaves this block only: 3 goes
            with pytest.raises(pgerrors.UniqueViolation):
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (4)")
                    conn.execute("INSERT INTO t VALUES (1)")  # fails: the savepoint undoes 4
            conn.execute("INSERT INTO t VALUES (5)")  # the outer transaction goes on
    assert pg.http.rows("SELECT id FROM t ORDER BY id", db) == [[1], [2], [5]]


def test_an_error_leaves_the_transaction_failed_until_rollback_to(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    with pg.connect(db) as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("SAVEPOINT a")
        conn.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(pgerrors.UniqueViolation):
            conn.execute("INSERT INTO t VALUES (2)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(pgerrors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        with pytest.raises(pgerrors.InvalidSavepointSpecification):
            conn.execute("ROLLBACK TO SAVEPOINT nope")
        conn.execute("ROLLBACK TO SAVEPOINT a")  # resumes: 2 is undone, 1 stays
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,)]
        conn.execute("RELEASE SAVEPOINT a")
        with pytest.raises(pgerrors.InvalidSavepointSpecification):
            conn.execute("ROLLBACK TO a")
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (7)")
        with pytest.raises(pgerrors.UndefinedTable):
            conn.execute("SELECT * FROM nowhere")
        assert conn.execute("COMMIT").statusmessage == "ROLLBACK"  # a failed one rolls back
    assert pg.http.rows("SELECT count(*) FROM t", db) == [[0]]
    with pg.connect(db) as conn:
        with pytest.raises(
            pgerrors.NoActiveSqlTransaction,  # 25P01, PostgreSQL's, not 25000
            match="SAVEPOINT can only be used in transaction blocks",
        ):
            conn.execute("SAVEPOINT outside")
        for statement in ("RELEASE outside", "ROLLBACK TO outside"):
            with pytest.raises(pgerrors.NoActiveSqlTransaction):
                conn.execute(statement)
