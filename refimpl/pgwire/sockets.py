"""A PostgreSQL connection's socket as the worker answering it uses it (`Socket`, a link's
`Transport`): sends that wait only for a client slow to take them, and the waits of a COPY
FROM STDIN for its data, bounded by `COPY_WAIT_SECONDS` and ended by the server's stop."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time

from refimpl.engine import admission
from refimpl.engine.measures import PgCounts
from refimpl.errors import ProtocolError, Unavailable

RECV_BYTES = 256 * 1024  # a COPY's data, read as it comes: large reads, few of them
# A connection's next messages (and a walsender's client's): most reads are one small
# packet. Under the allocator's mmap threshold (128 KB) on purpose: a recv of more maps a
# fresh buffer of the whole size at each call and shrinks it to what came (mmap, mremap,
# munmap: three system calls and a page fault, about 12 us a read), however few bytes came.
READ_BYTES = 64 * 1024
POLL_SECONDS = 0.2  # how soon an idle worker notices a stop
COPY_WAIT_SECONDS = 60.0  # a COPY FROM STDIN whose client sends nothing this long ends


class Socket:
    """A link's `Transport`: the worker that answers the connection sends and waits here
    (the connection is disarmed in the epoll set until that worker re-arms it)."""

    def __init__(self, sock: socket.socket, stopping: threading.Event, counts: PgCounts) -> None:
        self.sock = sock
        self._stopping = stopping
        self._counts = counts  # a COPY's data read here counts as received

    def fileno(self) -> int:
        return self.sock.fileno()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def recv_now(self) -> bytes | None:
        """What the client sent, without waiting (a walsender's read): None when nothing,
        b"" when it closed."""
        try:
            data = self.sock.recv(READ_BYTES)
            while pending := tls_pending(self.sock):
                data += self.sock.recv(pending)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return None
        except OSError:
            return b""
        self._counts.received(len(data))
        return data

    def send_now(self, data: bytes) -> int:
        """Send what the socket takes without waiting; how many bytes it took."""
        try:
            return self.sock.send(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return 0

    def send(self, data: bytes) -> None:
        # An answer nearly always fits the socket's buffer: one send() as the socket is
        # (non-blocking), and only a client slow to take it costs the two mode switches of
        # a blocking sendall (whose wait SO_SNDTIMEO bounds).
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            sent = 0  # TLS: nothing was taken, the same bytes go again
        if sent == len(data):
            return
        admission.waiting()  # a client slow to take it is waited for without a place
        self.sock.setblocking(True)
        try:
            self.sock.sendall(memoryview(data)[sent:])
        finally:
            self.sock.setblocking(False)

    def receive(self) -> bytes:
        admission.waiting()  # the client may take its time: the place goes to another worker
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        deadline = time.monotonic() + COPY_WAIT_SECONDS
        while not self._stopping.is_set():
            if tls_pending(self.sock) or poller.poll(POLL_SECONDS * 1000):
                try:
                    data = self.sock.recv(RECV_BYTES)
                    self._counts.received(len(data))
                    return data
                except (BlockingIOError, ssl.SSLWantReadError):
                    continue
                except OSError:
                    return b""
            if time.monotonic() > deadline:
                raise ProtocolError(
                    f"the client sent no COPY data for {COPY_WAIT_SECONDS:.0f}"
                    " seconds; the connection ends and nothing was copied"
                )
        raise Unavailable("the server is stopping; the COPY was not done, nothing was copied")


def tls_pending(sock: socket.socket) -> int:
    """Bytes TLS has decrypted and holds; epoll sees only what the kernel holds."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0
