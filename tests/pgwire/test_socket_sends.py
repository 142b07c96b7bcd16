"""A streamed answer's sends (`refimpl.pgwire.sockets.Socket`, a COPY TO's rows): the
budget of waiting bounds the client's reading, never the statement's making of the rows,
and a TLS send that must first read waits for the socket to be readable, not writable."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from refimpl.engine.measures import PgCounts
from refimpl.netpool import send_limits
from refimpl.pgwire.sockets import Socket

PART = 8 * 1024 * 1024  # more than the kernel buffers of both ends hold: each part waits


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: the server's end (non-blocking) and the client's, their
    buffers fixed at a few hundred KB (not grown by the kernel)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
    server.setblocking(False)
    with server, client:
        yield server, client


def _read_all(sock: socket.socket, got: list[int]) -> None:
    """Read as fast as possible until the other end closes; the bytes into `got`."""
    while data := sock.recv(1 << 20):
        got[0] += len(data)


def test_rows_made_slowly_reach_a_client_that_reads_at_once(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client may keep the worker waiting 1.5 s in all, whatever the size; the statement
    # takes 0.6 s to make each of 4 parts (2.4 s). Before, the answer's deadline counted
    # from its start, and the third part was refused though every byte was taken at once.
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.5)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)
    server, client = pair
    got = [0]
    reader = threading.Thread(target=_read_all, args=(client, got))
    reader.start()
    transport = Socket(server, threading.Event(), PgCounts())
    transport.start_answer()
    for _ in range(4):
        time.sleep(0.6)
        transport.send(b"r" * PART)
    transport.end_answer()
    server.shutdown(socket.SHUT_WR)
    reader.join(30)
    assert got[0] == 4 * PART


class _WantsReadFirst:
    """A TLS socket as `ssl`'s is while it must read the client's record before it can send
    (a key update): each send raises SSLWantReadError until the client has sent a byte,
    which the send then reads. Counts its sends."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.sends = sock, 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, data: bytes) -> int:
        self.sends += 1
        try:
            self.sock.recv(1)
        except BlockingIOError:
            raise ssl.SSLWantReadError("the read operation wants a record first") from None
        return self.sock.send(data)


def test_a_tls_send_that_must_read_waits_for_the_client_without_spinning(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    wants_read = _WantsReadFirst(server)
    transport = Socket(wants_read, threading.Event(), PgCounts())  # type: ignore[arg-type]
    speaker = threading.Timer(0.5, client.send, args=(b"k",))
    speaker.start()
    transport.start_answer()
    transport.send(b"row")
    transport.end_answer()
    speaker.join()
    assert client.recv(16) == b"row"
    # Woken once the client's byte came: the first send, one as the socket was writable,
    # and the one after the byte. Before, it tried again as long as the socket was writable
    # (always): tens of thousands of sends in the half second.
    assert wants_read.sends <= 4, wants_read.sends
