"""psycopg 3's ways of sending statements, each against a real server: pipeline mode (errors
inside it included), executemany with and without RETURNING, automatic prepared statements,
binary cursors in a pipeline, and conn.cancel_safe() (the CancelRequest with the secret of
BackendKeyData) of a running statement."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from psycopg import errors as pgerrors

CREATE = "CREATE TABLE t (id INT PRIMARY KEY, name STRING, x DOUBLE)"


def test_pipeline_mode_sends_everything_before_reading_and_keeps_order(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        with conn.pipeline():
            cur = conn.cursor()
            for n in range(50):
                cur.execute("INSERT INTO t VALUES (%s, %s, %s)", (n, f"n{n}", n / 2))
            reads = [conn.execute("SELECT name FROM t WHERE id = %s", (n,)) for n in (3, 49)]
            binary = conn.cursor(binary=True)
            binary.execute("SELECT count(*), sum(x) FROM t")
        assert [r.fetchone() for r in reads] == [("n3",), ("n49",)]
        assert binary.fetchone() == (50, sum(n / 2 for n in range(50)))


def test_an_error_in_a_pipeline_skips_the_rest_up_to_its_sync(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        with pytest.raises(pgerrors.UniqueViolation):
            with conn.pipeline():
                conn.execute("INSERT INTO t (id) VALUES (1)")
                conn.execute("INSERT INTO t (id) VALUES (1)")
                conn.execute("INSERT INTO t (id) VALUES (2)")  # skipped, as PostgreSQL does
        assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,)]
        with conn.pipeline():  # the connection goes on, in and out of pipeline mode
            conn.execute("INSERT INTO t (id) VALUES (3)")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_executemany_with_and_without_returning(pg, db):
    rows = [(n, f"name {n}", n * 1.5) for n in range(200)]
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        cur = conn.cursor()
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)
        assert cur.rowcount == 200
        cur.executemany("UPDATE t SET x = %s WHERE id = %s", [(0.5, 1), (0.25, 2)])
        assert conn.execute("SELECT x FROM t WHERE id IN (1, 2) ORDER BY id").fetchall() == [
            (0.5,),
            (0.25,),
        ]
        with pytest.raises(pgerrors.UniqueViolation):  # one transaction: none of them stays
            with conn.transaction():
                cur.executemany("INSERT INTO t (id) VALUES (%s)", [(500,), (1,)])
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (200,)


def test_statements_run_often_are_prepared_on_the_server(pg, db):
    with pg.connect(db, prepare_threshold=2) as conn:
        conn.execute(CREATE)
        for n in range(10):
            conn.execute("INSERT INTO t (id, name) VALUES (%s, %s)", (n, str(n)))
        names = [
            conn.execute("SELECT name FROM t WHERE id = %s", (n,)).fetchone() for n in range(10)
        ]
        prepared = conn.execute("SELECT 1", prepare=True).fetchone()  # prepared at once
    assert names == [(str(n),) for n in range(10)]
    assert prepared == (1,)


def test_cancel_safe_stops_a_running_statement(pg, db):
    rows = "id,name\n" + "\n".join(f"{n},name{n}" for n in range(300_000))
    pg.http.sql("CREATE TABLE big (id INT, name STRING)", db)
    answer = pg.http.post("/imp", params={"db": db, "table": "big"}, data=rows.encode())
    assert answer.status_code == 200, answer.text
    with pg.connect(db) as conn:
        timer = threading.Timer(0.3, conn.cancel_safe)
        timer.start()
        started = time.monotonic()
        with pytest.raises(pgerrors.QueryCanceled):
            conn.execute("SELECT count(*) FROM big a WHERE a.name LIKE '%x%y%z%' OR a.id * 3 = -1")
        timer.join()
        assert time.monotonic() - started < 10
        conn.cancel_safe()  # idle: nothing happens
        assert conn.execute("SELECT count(*) FROM big").fetchone() == (300_000,)


def test_a_cancel_with_a_wrong_secret_changes_nothing(pg, db):
    with pg.connect(db) as conn:
        pid = conn.info.backend_pid
        with socket.create_connection((pg.host, pg.port), timeout=5) as sock:
            sock.sendall(struct.pack("!iiii", 16, 80877102, pid, 12345))  # not its key
            assert sock.recv(1) == b""  # the server answers nothing and closes
        assert conn.execute("SELECT 1").fetchone() == (1,)
