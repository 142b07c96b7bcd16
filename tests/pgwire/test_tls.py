"""TLS on the PostgreSQL port: with a certificate (here a self-signed one made for the test)
an SSLRequest is answered 'S' and psycopg's `sslmode=require` works, queries and COPY alike;
bytes sent before the handshake are refused; without a certificate see test_serving."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.pgwire.conftest import PgServer, tls_pg_server


@pytest.fixture(scope="module")
def pg_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with tls_pg_server(tmp_path_factory.mktemp("pg_tls")) as running:
        yield running


def test_sslmode_require_is_served_over_tls(pg_tls):
    with pg_tls.connect(sslmode="require") as conn:
        assert conn.pgconn.ssl_in_use
        conn.execute("CREATE TABLE tls_t (id INT PRIMARY KEY, name STRING)")
        cur = conn.cursor()
        with cur.copy("COPY tls_t FROM STDIN") as copy:
            for n in range(5000):  # more than one TLS record
                copy.write_row((n, "x" * 50))
        assert conn.execute("SELECT count(*), max(id) FROM tls_t").fetchone() == (5000, 4999)
        rows = conn.execute("SELECT id, name FROM tls_t ORDER BY id").fetchall()
        assert len(rows) == 5000
        conn.execute("DROP TABLE tls_t")
    with pg_tls.connect(sslmode="disable") as conn:  # plain text is still served
        assert not conn.pgconn.ssl_in_use
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_bytes_sent_before_the_handshake_are_refused(pg_tls):
    startup = struct.pack("!i", 196608) + b"user\0admin\0\0"
    with socket.create_connection((pg_tls.host, pg_tls.port)) as sock:
        # An SSLRequest with a plain-text startup behind it: an attacker's injection.
        sock.sendall(
            struct.pack("!ii", 8, 80877103) + struct.pack("!i", len(startup) + 4) + startup
        )
        sock.settimeout(10)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer[:1] == b"S"
    assert b"08P01" in answer and b"securing" in answer
    with pg_tls.connect(sslmode="require") as conn:  # the server goes on
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_many_handshakes_at_once_all_finish(pg_tls):
    # A handshake step re-arms the socket for its next flight: the connection must be free
    # for the worker that the flight wakes, or the handshake stalls until the client's timeout.
    def handshake(_: int) -> tuple[int]:
        with pg_tls.connect(sslmode="require") as conn:
            return conn.execute("SELECT 1").fetchone()

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(handshake, range(96))) == [(1,)] * 96
