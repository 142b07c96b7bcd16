"""A PostgreSQL connection's socket as the worker answering it uses it (`Socket`, a link's
`Transport`): sends that wait only for a client slow to take them (an answer streamed while
its statement runs, a COPY TO's, within its deadline as a whole), and the waits of a COPY
FROM STDIN for its data, bounded by `COPY_WAIT_SECONDS` and ended by the server's stop."""

from __future__ import annotations

import logging
import select
import socket
import ssl
import threading
import time

from refimpl.engine import admission
from refimpl.engine.measures import PgCounts
from refimpl.errors import ProtocolError, Unavailable
from refimpl.netpool import send_limits

log = logging.getLogger("refimpl.pgwire")

RECV_BYTES = 256 * 1024  # a COPY's data, read as it comes: large reads, few of them
# A connection's next messages (and a walsender's client's): most reads are one small
# packet. Under the allocator's mmap threshold (128 KB) on purpose: a recv of more maps a
# fresh buffer of the whole size at each call and shrinks it to what came (mmap, mremap,
# munmap: three system calls and a page fault, about 12 us a read), however few bytes came.
READ_BYTES = 64 * 1024
POLL_SECONDS = 0.2  # how soon an idle worker notices a stop
COPY_WAIT_SECONDS = 60.0  # a COPY FROM STDIN whose client sends nothing this long ends
SEND_PAUSE_SECONDS = 60.0  # a streamed answer's client that takes nothing this long is dropped


class Socket:
    """A link's `Transport`: the worker that answers the connection sends and waits here
    (the connection is disarmed in the epoll set until that worker re-arms it)."""

    def __init__(self, sock: socket.socket, stopping: threading.Event, counts: PgCounts) -> None:
        self.sock = sock
        self._stopping = stopping
        self._counts = counts  # a COPY's data read here counts as received
        # How long the client of the streamed answer being sent (`start_answer`) may still
        # keep this worker waiting, or None.
        self._budget: float | None = None
        # The last `send_now` took nothing because TLS must first read a record of the
        # client's: its rest waits for the socket to be readable, not writable (it is).
        self.wants_read = False

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
        """Send what the socket takes without waiting; how many bytes it took (0 with
        `wants_read` set when TLS must read from the client before it can send more)."""
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, ssl.SSLWantWriteError):
            sent = 0
        except ssl.SSLWantReadError:
            self.wants_read = True
            return 0
        self.wants_read = False
        return sent

    def start_answer(self) -> None:
        """What `send` sends from now on is one answer streamed while its statement runs
        (a COPY TO's rows): it has a budget of waiting as a whole
        (`refimpl.netpool.send_limits`), which each part sent extends and only the time
        spent waiting for the client spends (not the statement's making of the rows); a
        client that has spent it is dropped."""
        self._budget = send_limits.SEND_GRACE_SECONDS

    def end_answer(self) -> None:
        """The streamed answer is sent: later sends have no budget of its."""
        self._budget = None

    def send(self, data: bytes) -> None:
        budget = self._budget
        if budget is not None:
            budget = self._budget = budget + send_limits.send_allowance(len(data))
        # An answer nearly always fits the socket's buffer: one send() as the socket is
        # (non-blocking), and only a client slow to take it is waited for.
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            sent = 0  # TLS: nothing was taken, the same bytes go again
        if sent == len(data):
            return
        admission.waiting()  # a client slow to take it is waited for without a place
        if budget is None:  # a connection's last words: a blocking sendall, SO_SNDTIMEO's
            self.sock.setblocking(True)
            try:
                self.sock.sendall(memoryview(data)[sent:])
            finally:
                self.sock.setblocking(False)
            return
        waited_from = time.monotonic()
        try:
            self._send_by(memoryview(data)[sent:], waited_from + budget)
        finally:
            self._budget = budget - (time.monotonic() - waited_from)

    def _send_by(self, rest: memoryview, deadline: float) -> None:
        """All of `rest` as the client takes it, by `deadline` (TimeoutError, logged, past
        it or after a pause of SEND_PAUSE_SECONDS: the connection ends). Woken when the
        socket takes more: a blocking send would wait out SO_SNDTIMEO, past the deadline."""
        poller = select.poll()  # not select: sockets are numbered past FD_SETSIZE
        fd, awaited = self.sock.fileno(), select.POLLOUT
        poller.register(fd, awaited)
        while rest:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "closed a connection: its answer (a COPY TO's rows) was not taken whole"
                    " by its deadline"
                )
                raise TimeoutError("the answer was not taken whole by its deadline")
            pause = min(left, SEND_PAUSE_SECONDS)
            if not poller.poll(1000 * pause) and pause == SEND_PAUSE_SECONDS:
                raise TimeoutError("the client took nothing for too long")
            try:
                rest = rest[self.sock.send(rest) :]
                wanted = select.POLLOUT
            except (BlockingIOError, ssl.SSLWantWriteError):
                wanted = select.POLLOUT
            except ssl.SSLWantReadError:
                # TLS must first read a record of the client's (a key update): waiting for
                # the socket to be writable, which it is, would spin to the deadline.
                wanted = select.POLLIN
            if wanted != awaited:
                poller.modify(fd, wanted)
                awaited = wanted

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
