"""A TCP relay between a PostgreSQL client and the server that records the SQL the client
sends (its Query and Parse messages), so that the tests keep, under `captured/`, the exact
statements each client library sends: a new version's queries show up as a diff."""

from __future__ import annotations

import os
import re
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CAPTURED = Path(__file__).parent / "captured"
_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


class Relay:
    """Listens on a loopback port and relays each connection to `target`; `statements`
    holds the SQL texts the clients sent, in order, each once per connection's sending."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.statements: list[str] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        _pump(server, client)

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        buffer = b""
        started = False
        try:
            while chunk := client.recv(65536):
                server.sendall(chunk)
                buffer += chunk
                buffer, started = self._read(buffer, started)
        except OSError:
            pass
        finally:
            _close(client, server)

    def _read(self, buffer: bytes, started: bool) -> tuple[bytes, bool]:
        while True:
            if not started:
                if len(buffer) < 8:
                    return buffer, started
                (length, code) = struct.unpack("!ii", buffer[:8])
                if len(buffer) < length:
                    return buffer, started
                buffer = buffer[length:]
                started = code not in (_SSL_REQUEST, _GSS_REQUEST)
                continue
            if len(buffer) < 5:
                return buffer, started
            kind = buffer[:1]
            (length,) = struct.unpack("!i", buffer[1:5])
            if len(buffer) < 1 + length:
                return buffer, started
            body = buffer[5 : 1 + length]
            buffer = buffer[1 + length :]
            text = None
            if kind == b"Q":
                text = body.split(b"\0", 1)[0]
            elif kind == b"P":
                text = body.split(b"\0", 2)[1]
            if text is not None:
                with self._lock:
                    self.statements.append(text.decode("utf-8", "replace"))

    def close(self) -> None:
        self._listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source, sink)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


@contextmanager
def relay(host: str, port: int) -> Iterator[Relay]:
    running = Relay(host, port)
    try:
        yield running
    finally:
        running.close()


def normalised(statements: list[str], names: dict[str, str]) -> list[str]:
    """The statements once each, in first-sent order, with the test's own names (a fresh
    database's, say) replaced by stable words so that the file changes only when the
    client does."""
    seen: dict[str, None] = {}
    for text in statements:
        for name, word in names.items():
            text = text.replace(name, word)
        text = re.sub(r"[ \t]+\n", "\n", text.strip())
        if text:
            seen.setdefault(text, None)
    return list(seen)


RECAPTURE_VARIABLE = "REFIMPL_RECAPTURE"


def record(client: str, statements: list[str]) -> None:
    """Check the captured statements against `captured/<client>.sql`: a statement the file
    does not hold (a new client version's query) fails the test, which names the variable
    that rewrites the file (`REFIMPL_RECAPTURE=1`), so the new queries show up as a diff
    to review. A statement of the file not sent this time is no failure: a client's last
    words at close (a ROLLBACK) depend on timing. Tests never write the tree otherwise."""
    kept = CAPTURED / f"{client}.sql"
    if os.environ.get(RECAPTURE_VARIABLE):
        kept.write_text("".join(f"{s};\n\n" for s in statements))
        return
    known = {s.strip() for s in kept.read_text().split(";\n\n") if s.strip()}
    new = [s for s in statements if s.strip() not in known]
    assert not new, (
        f"{client} sent statements not in {kept.name}: {new!r}; run the test again with"
        f" {RECAPTURE_VARIABLE}=1 and review the file's diff"
    )
