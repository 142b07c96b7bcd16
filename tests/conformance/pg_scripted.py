"""A scripted PostgreSQL server for the runner's own tests of `pg` steps: it logs a client in
with the admin token as password, then answers each Query as the test's script says."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

from tests.conformance.fake_http import ADMIN

GOOD_PASSWORD = ADMIN


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def ready(status: bytes) -> bytes:
    return message(b"Z", status)


def complete(tag: str) -> bytes:
    return message(b"C", tag.encode() + b"\0")


def error(code: str, text: str, severity: str = "ERROR") -> bytes:
    fields = f"S{severity}\0C{code}\0M{text}\0\0".encode()
    return message(b"E", fields)


Script = Callable[[str], bytes]


class ScriptedServer:
    """Logs in a client whose password is the admin token; answers a Query by `script`."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                (length,) = struct.unpack("!i", self._read(conn, 4))
                self._read(conn, length - 4)
                conn.sendall(message(b"R", struct.pack("!i", 3)))
                kind, body = self._next(conn)
                if kind != b"p" or body.rstrip(b"\0").decode() != GOOD_PASSWORD:
                    conn.sendall(error("28P01", "password authentication failed", "FATAL"))
                    return
                conn.sendall(message(b"R", struct.pack("!i", 0)) + ready(b"I"))
                self._session(conn)
            except (ConnectionError, OSError):
                return

    def _session(self, conn: socket.socket) -> None:
        """After the login: each Query answered by `script`, until Terminate."""
        while True:
            kind, body = self._next(conn)
            if kind == b"X":
                return
            if kind == b"Q":
                conn.sendall(self.script(body.rstrip(b"\0").decode()))

    def _next(self, conn: socket.socket) -> tuple[bytes, bytes]:
        kind = self._read(conn, 1)
        (length,) = struct.unpack("!i", self._read(conn, 4))
        return kind, self._read(conn, length - 4)

    def close(self) -> None:
        self.listener.close()
