"""What the isolation tests of the protocol's port share: raw protocol bytes, the server
process's memory, and a victim whose session must keep answering meanwhile."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from tests.http.conftest import running_server
from tests.pgwire.conftest import PgServer, pg_address


def startup_packet(user: str, database: str) -> bytes:
    body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{database}\0\0".encode()
    return struct.pack("!i", len(body) + 4) + body


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts too)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def error_fields(data: bytes) -> dict[str, str]:
    """The fields of the first ErrorResponse in `data` (code letter -> text)."""
    at = data.find(b"E")
    assert at >= 0, f"no ErrorResponse in {data[:200]!r}"
    (length,) = struct.unpack_from("!i", data, at + 1)
    body = data[at + 5 : at + 1 + length]
    fields: dict[str, str] = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode()
    return fields


def connect_from(source: str, port: int) -> socket.socket:
    """A TCP connection to the server from the loopback address `source` (127.0.0.x)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


@contextlib.contextmanager
def pg_server(tmp: Path, **conf: object) -> Iterator[PgServer]:
    """A server of its own (`conf`: its kdb.conf settings), stopped cleanly at the end."""
    data = tmp / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("".join(f"{key} = {value}\n" for key, value in conf.items()))
    with running_server(data, "--pg-port", "0") as running:
        yield PgServer(running, *pg_address(running))


def assert_alive(pg: PgServer, victim: psycopg.Connection, bound: float = 10.0) -> None:
    """/health and a session opened before the attack both answer, within `bound` seconds."""
    started = time.monotonic()
    assert pg.http.get("/health", token=None, timeout=bound).status_code == 200
    assert victim.execute("SELECT 1").fetchone() == (1,)
    assert time.monotonic() - started < bound


def refused_login(pg: PgServer, user: str, password: str, database: str) -> dict[str, str]:
    """The FATAL error fields the server answers a login with (psycopg hides its SQLSTATE)."""
    with socket.create_connection((pg.host, pg.port), timeout=10) as sock:
        sock.sendall(startup_packet(user, database))
        assert sock.recv(9)[:1] == b"R"  # AuthenticationCleartextPassword
        body = password.encode() + b"\0"
        sock.sendall(b"p" + struct.pack("!i", len(body) + 4) + body)
        fields = error_fields(read_until_closed(sock))
    assert fields["S"] == "FATAL", fields
    return fields


def query_message(sql: str) -> bytes:
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


def logged_in(pg: PgServer, user: str, password: str, database: str = "demo") -> socket.socket:
    """A raw connection logged in (its ReadyForQuery read): for what drivers will not send."""
    sock = socket.create_connection((pg.host, pg.port), timeout=10)
    sock.sendall(startup_packet(user, database))
    assert sock.recv(9)[:1] == b"R"  # AuthenticationCleartextPassword
    body = password.encode() + b"\0"
    sock.sendall(b"p" + struct.pack("!i", len(body) + 4) + body)
    MessageReader(sock).until(b"Z", 1)
    return sock


class MessageReader:
    """The server's messages on a raw connection, read as they are needed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()
        self._at = 0

    def next(self) -> tuple[bytes, bytes]:
        """The next message: its type byte and body."""
        while (available := len(self._buffer) - self._at) < 5 or available < 1 + _length(
            self._buffer, self._at
        ):
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise AssertionError("the server closed the connection")
            del self._buffer[: self._at]
            self._at = 0
            self._buffer += chunk
        at = self._at
        end = at + 1 + _length(self._buffer, at)
        kind, body = bytes(self._buffer[at : at + 1]), bytes(self._buffer[at + 5 : end])
        self._at = end
        assert kind != b"E", f"an error: {body!r}"
        return kind, body

    def until(self, kind: bytes, count: int) -> list[bytes]:
        """Read until `count` messages of `kind` came; their bodies, in order."""
        seen: list[bytes] = []
        while len(seen) < count:
            got, body = self.next()
            if got == kind:
                seen.append(body)
        return seen


def _length(buffer: bytearray, at: int) -> int:
    length: int = struct.unpack_from("!i", buffer, at + 1)[0]
    return length
