"""Before login a client has proven nothing: it holds little memory, little time, and never
the places of users who can log in (pg_login_timeout_s, pg_max_unauthenticated_per_address,
pg_admin_reserved_connections)."""

from __future__ import annotations

import socket
import struct
import time

import psycopg
import pytest

from tests.pgwire.attack import (
    assert_alive,
    connect_from,
    error_fields,
    pg_server,
    read_until_closed,
    startup_packet,
)
from tests.pgwire.conftest import PgServer

ANNOUNCED = 60 * 1024 * 1024  # what each message claims to be
SENT = 4 * 1024 * 1024  # what each client sends of it (if the server still reads)


def _flood(sock: socket.socket) -> None:
    """Send up to SENT bytes of a message body; stop where the server closed."""
    chunk = b"x" * 65536
    try:
        for _ in range(SENT // len(chunk)):
            sock.sendall(chunk)
    except OSError:
        pass  # the server refused it and closed: what the test wants


def _answered(sock: socket.socket) -> bool:
    """Whether the server sent something (or closed) already; does not wait."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except ConnectionResetError:
        pass
    finally:
        sock.settimeout(10)
    return True


def _big_startup(pg: PgServer) -> socket.socket:
    sock = socket.create_connection((pg.host, pg.port), timeout=10)
    sock.sendall(struct.pack("!ii", ANNOUNCED, 196608))
    return sock


def _big_password(pg: PgServer) -> socket.socket:
    sock = socket.create_connection((pg.host, pg.port), timeout=10)
    sock.sendall(startup_packet("admin", "demo"))
    assert sock.recv(9)[:1] == b"R"  # AuthenticationCleartextPassword
    sock.sendall(b"p" + struct.pack("!i", ANNOUNCED))
    return sock


@pytest.mark.parametrize("opening", [_big_startup, _big_password])
def test_a_huge_message_before_login_is_refused_before_it_is_read(tmp_path, opening):
    with pg_server(tmp_path) as pg:
        victim = pg.connect()
        pg.http.sql("CREATE TABLE kept (id INT)")
        pg.http.sql("INSERT INTO kept VALUES (1)")
        before = pg.http.memory_kb()
        socks = [opening(pg) for _ in range(3)]
        for sock in socks:
            _flood(sock)
        for sock in socks:
            answer = read_until_closed(sock)
            fields = error_fields(answer)
            assert fields["C"] == "54000", fields
            assert "longer than the server takes (10000)" in fields["M"]
            sock.close()
        grown = pg.http.memory_kb() - before
        assert grown < 40 * 1024, f"the server grew {grown} kB for three refused messages"
        assert_alive(pg, victim)
        assert pg.http.rows("SELECT id FROM kept") == [[1]]
        victim.close()


def test_silent_sockets_lock_out_neither_users_nor_the_admin(tmp_path):
    limits = {
        "pg_max_connections": 10,
        "pg_max_unauthenticated_per_address": 5,
        "pg_login_timeout_s": 1.5,
    }
    with pg_server(tmp_path, **limits) as pg:
        victim = pg.connect()
        pg.http.sql("CREATE USER reader")
        pg.http.sql("GRANT READ ON DATABASE demo TO reader")
        reader_token = pg.http.new_token("reader")
        pg.http.sql("CREATE TABLE kept (id INT)")
        pg.http.sql("INSERT INTO kept VALUES (1)")
        silent = [connect_from("127.0.0.2", pg.port) for _ in range(100)]
        time.sleep(0.3)
        # Past the per-address cap, a connection is told so at once and closed.
        refused = [s for s in silent if _answered(s)]
        assert len(refused) == 95
        fields = error_fields(read_until_closed(refused[0]))
        assert fields["C"] == "53300"
        assert "pg_max_unauthenticated_per_address" in fields["M"]
        # Meanwhile users and the admin log in: the silent ones hold none of their places.
        with pg.connect() as admin, pg.connect(user="reader", password=reader_token) as reader:
            assert admin.execute("SELECT 1").fetchone() == (1,)
            assert reader.execute("SELECT 1").fetchone() == (1,)
        assert_alive(pg, victim)
        # The five that waited are closed once pg_login_timeout_s has passed.
        started = time.monotonic()
        held = [s for s in silent if s not in refused]
        for sock in held:
            fields = error_fields(read_until_closed(sock))
            assert fields["C"] == "57014" and "pg_login_timeout_s" in fields["M"], fields
        assert time.monotonic() - started < 5
        for sock in silent:
            sock.close()
        assert_alive(pg, victim)
        assert pg.http.rows("SELECT id FROM kept") == [[1]]


def test_the_last_places_are_kept_for_admins(tmp_path):
    limits = {"pg_max_connections": 4, "pg_admin_reserved_connections": 2}
    with pg_server(tmp_path, **limits) as pg:
        pg.http.sql("CREATE USER reader")
        pg.http.sql("GRANT READ ON DATABASE demo TO reader")
        token = pg.http.new_token("reader")
        users = [pg.connect(user="reader", password=token) for _ in range(2)]
        with pytest.raises(psycopg.OperationalError, match="pg_admin_reserved_connections"):
            pg.connect(user="reader", password=token)
        admins = [pg.connect() for _ in range(2)]
        assert [a.execute("SELECT 1").fetchone() for a in admins] == [(1,), (1,)]
        with pytest.raises(psycopg.OperationalError, match="pg_max_connections"):
            pg.connect()
        assert_alive(pg, users[0])
        for conn in users + admins:
            conn.close()
