"""The protocol's server: broken input, SSL refused, limits, a dropped connection, the stop."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.http.conftest import ROOT, _clean_environment, start_server
from tests.hypothesis_settings import OVER_FIXTURE
from tests.pgwire.conftest import PgServer, pg_address


def startup_packet(user: str, database: str) -> bytes:
    body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{database}\0\0".encode()
    return struct.pack("!i", len(body) + 4) + body


def read_all(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@settings(OVER_FIXTURE, max_examples=25)
@given(garbage=st.binary(min_size=1, max_size=200))
def test_broken_bytes_end_in_an_error_never_a_crash(pg, garbage):
    with socket.create_connection((pg.host, pg.port)) as sock:
        sock.sendall(startup_packet("admin", "demo"))
        sock.settimeout(10)
        assert sock.recv(1) == b"R"  # asked for the password
        sock.sendall(b"p" + struct.pack("!i", len(pg.token) + 5) + pg.token.encode() + b"\0")
        sock.sendall(garbage + b"X\0\0\0\x04")  # then Terminate, if the garbage left us a frame
        sock.shutdown(socket.SHUT_WR)
        answer = read_all(sock)
    assert b"Z\0\0\0\x05I" in answer  # logged in
    with pg.connect() as conn:  # the server goes on
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_ssl_is_refused_cleanly(pg):
    with pytest.raises(psycopg.OperationalError, match="does not support SSL"):
        pg.connect(sslmode="require")
    with pg.connect(sslmode="prefer") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_dropped_connection_rolls_its_transaction_back(pg, db):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    conn = pg.connect(db)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.pgconn.finish()  # the socket closes without COMMIT or Terminate
    with pg.connect(db) as other:  # the write lock was let go
        other.execute("INSERT INTO t VALUES (2)")
        assert other.execute("SELECT id FROM t").fetchall() == [(2,)]


def test_the_connection_limit_and_the_stop(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("pg_max_connections = 2\n")
    server = start_server(data, "--pg-port", "0")
    try:
        pg = PgServer(server, *pg_address(server))
        first, second = pg.connect(), pg.connect()
        with pytest.raises(psycopg.OperationalError, match="pg_max_connections"):
            pg.connect()
        second.close()
        first.execute("BEGIN")
        first.execute("CREATE TABLE t (id INT)")
    finally:
        code = server.stop()
    assert code == 0, server.log.read_text()[-3000:]
    with pytest.raises(psycopg.OperationalError):
        first.execute("SELECT 1")  # ended by the stop


def test_a_startup_without_a_database_logs_into_demo(pg):
    with socket.create_connection((pg.host, pg.port)) as sock:
        body = struct.pack("!i", 196608) + b"user\0admin\0\0"
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        sock.settimeout(10)
        assert sock.recv(1) == b"R"
        sock.recv(8)
        password = pg.token.encode() + b"\0"
        sock.sendall(b"p" + struct.pack("!i", len(password) + 4) + password)
        query = b"SELECT current_database() AS db\0"
        sock.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query + b"X\0\0\0\x04")
        answer = read_all(sock)
    assert b"\0\0\0\x04demo" in answer  # the one value of the DataRow


def test_a_taken_port_stops_the_start_with_a_clear_message(pg, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "refimpl",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            "0",
            "--pg-port",
            str(pg.port),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_clean_environment(),
        check=False,
    )
    assert done.returncode == 2
    assert f"cannot serve the PostgreSQL protocol on 127.0.0.1:{pg.port}" in done.stderr


def test_clients_that_read_no_answer_hold_no_place_of_the_others(pg):
    # Their answers are larger than the sockets hold, and costly to make (so they ran on
    # the long place): each worker sending one waits for its client, and hands its place
    # on first, so a statement known to be costly still gets the long place to run on.
    wide = "x" * 1000
    stuck = [pg.connect() for _ in range(3)]  # more than the places there are
    try:
        for conn in stuck:
            conn.pgconn.send_query(f"SELECT '{wide}' FROM generate_series(1, 20000)".encode())
        time.sleep(1.0)  # their answers are being sent: the sockets are full
        with pg.connect() as other:
            started = time.monotonic()
            assert other.execute("SELECT 1").fetchone() == (1,)
            for _ in range(3):  # from the second run on, known costly: it needs the long place
                assert other.execute(
                    "SELECT count(*) FROM generate_series(1, 300000)"
                ).fetchone() == (300000,)
            assert time.monotonic() - started < 10
    finally:
        for conn in stuck:
            conn.pgconn.finish()
