"""A client of the protocol that takes its answers a byte at a time, never pausing long: the
answers left unsent have a deadline as a whole (`refimpl.netpool.send_limits`), past which
the connection is closed and the server logs it. Before, only a pause was bounded (60 s, each
time the client took nothing), so such a client kept its connection and up to
`UNSENT_LIMIT` plus one answer of memory for as long as it liked."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.netpool import send_limits
from refimpl.pgwire.options import PgOptions
from refimpl.pgwire.serving import PgServer
from tests.netpool.slow_reader import trickle_then_read
from tests.pgwire.attack import MessageReader, query_message, startup_packet

# About 20 MB of rows: far more than the kernel's buffers of both ends hold.
BIG_QUERY = f"SELECT '{'x' * 1000}' FROM generate_series(1, 20000)"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PgServer, str]]:
    """The protocol's server on a new data folder in this process, and the admin's token."""
    instance = Instance.open(tmp_path / "data")
    token = instance.access.ensure_admin()
    assert token is not None
    server = PgServer(instance, PgOptions(port=0, threads=2))
    server.start()
    try:
        yield server, token
    finally:
        server.stop()
        instance.close()


def _ask(server: PgServer, token: str, *statements: str, query: str = BIG_QUERY) -> socket.socket:
    """A connection logged in, its receive buffer small, `statements` run (each answered
    whole), then `query` sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(server.address)
    sock.sendall(startup_packet("admin", "demo"))
    assert sock.recv(9)[:1] == b"R"  # AuthenticationCleartextPassword
    body = token.encode() + b"\0"
    sock.sendall(b"p" + struct.pack("!i", len(body) + 4) + body)
    MessageReader(sock).until(b"Z", 1)
    for statement in statements:
        sock.sendall(query_message(statement))
        MessageReader(sock).until(b"Z", 1)
    sock.sendall(query_message(query))
    return sock


def test_answers_taken_too_slowly_are_cut_off_at_their_deadline(
    served: tuple[PgServer, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The deadline: 1 s, whatever the size (the size's allowance made negligible).
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.0)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)
    caplog.set_level(logging.WARNING, logger="refimpl.pgwire")
    server, token = served
    with _ask(server, token) as sock:
        got, closed = trickle_then_read(sock, 4.0)
    assert closed, "the connection was kept open"
    assert got < 20_000 * 1000, "all the rows went to a client slower than the deadline allows"
    assert any("not taken whole" in r.getMessage() for r in caplog.records), caplog.text


def test_a_client_as_fast_as_the_allowance_gets_its_whole_answer(
    served: tuple[PgServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short grace, but the size's allowance as the server has it: 20 MB get 300 s.
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.0)
    server, token = served
    with _ask(server, token) as sock:
        got, closed = trickle_then_read(sock, 2.0)
    assert not closed and got > 20_000 * 1000  # the rows, then ReadyForQuery: kept open


# The same rows as BIG_QUERY's, in a table COPY TO sends.
COPIED = (
    "CREATE TABLE copied (id INT PRIMARY KEY, s STRING)",
    f"INSERT INTO copied SELECT g, '{'x' * 1000}' FROM generate_series(1, 20000) g",
)


def test_a_copy_out_taken_too_slowly_is_cut_off_at_its_deadline(
    served: tuple[PgServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.0)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)
    server, token = served
    with _ask(server, token, *COPIED, query="COPY copied TO STDOUT") as sock:
        got, closed = trickle_then_read(sock, 4.0)
    assert closed, "the connection was kept open"
    assert got < 20_000 * 1000, "all the rows went to a client slower than the deadline allows"


class _WantsReadFirst:
    """A connection's socket as TLS's is while it must read a record of the client's before
    it can send (a renegotiation): each send raises SSLWantReadError until the client has
    sent a byte, which the send then takes as that record. Counts its sends."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.sends, self.record_read = sock, 0, False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, data: bytes) -> int:
        self.sends += 1
        if not self.record_read:
            try:
                self.record_read = self.sock.recv(1) == b"k"
            except BlockingIOError:
                raise ssl.SSLWantReadError("the operation wants a record first") from None
        return self.sock.send(data)


def test_answers_waiting_for_a_tls_read_wait_for_readable_without_spinning(
    served: tuple[PgServer, str],
) -> None:
    server, token = served
    with _ask(server, token, query="SELECT 1") as sock:  # logged in: its Client is known
        MessageReader(sock).until(b"Z", 1)
        (client,) = server._clients.values()
        sock.sendall(query_message(BIG_QUERY))
        deadline = time.monotonic() + 10
        while not client.unsent:  # the answer left waiting for the client to read
            assert time.monotonic() < deadline
            time.sleep(0.01)
        wants_read = _WantsReadFirst(client.transport.sock)
        client.transport.sock = wants_read  # type: ignore[assignment]
        sock.settimeout(0.5)
        got = 0
        try:  # all the kernel holds taken: the socket is writable from now on
            while more := sock.recv(1 << 20):
                got += len(more)
        except TimeoutError:
            pass
        # Woken once when it became writable; then waiting for the client's record. Before,
        # it was re-armed for writable, which fired at once: thousands of sends a second.
        assert wants_read.sends <= 3, wants_read.sends
        sock.sendall(b"k")  # the record TLS waited for
        sock.settimeout(10)
        tail = b""
        while not tail.endswith(b"Z\x00\x00\x00\x05I"):  # its ReadyForQuery: all came
            more = sock.recv(1 << 20)
            assert more, "the connection was closed"
            got += len(more)
            tail = (tail + more)[-6:]
    assert got > 20_000 * 1000
