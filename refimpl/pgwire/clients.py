"""One PostgreSQL connection as the server's workers and its acknowledging thread share it.

A worker answers the connection's messages; an answer that acknowledges a commit not yet
on disk is handed to the acknowledging thread (`refimpl.pgwire.acknowledging`), which
sends it after the flush. The worker re-arms the connection as it hands the answer over,
so that the acknowledging thread's only system call per answer is its send; `handed` and
`held` keep the connection's next messages unread until the answer went.
"""

from __future__ import annotations

import ssl
import threading
import time

from refimpl.pgwire.link import Link
from refimpl.pgwire.sockets import Socket


class Client:
    """One socket and its protocol link; `busy` while a worker (or, when `held`, the
    acknowledging thread) has it, disarmed in the epoll set."""

    def __init__(self, sock: Socket, address: str, link: Link) -> None:
        self.transport = sock
        self.sock = sock.sock
        self.address = address
        # Counted among the connections waiting for their login until it succeeds, then
        # among the logged-in ones (the server's `counts`).
        self.logged_in = False
        self.accepted_at = time.monotonic()
        self.link = link
        self.busy = False
        # Answers the socket did not take at once: while there are any, nothing more is
        # read or answered, so a client that reads nothing holds one answer at most.
        self.unsent = b""
        self.unsent_since = 0.0  # when the client last took some of them
        self.handshaking = False  # TLS: 'S' sent, the handshake not yet done
        # Held by the worker while it answers, by the acknowledging thread while it sends,
        # and by whoever arms the connection in the epoll set (so that an answer the
        # socket did not take is never left armed for reading only).
        self.lock = threading.Lock()
        # Its answer is with the acknowledging thread (1) or not (0): meanwhile nothing
        # more of it is read or answered, though it is armed for reading, so that the
        # common client, which waits for the answer, needs no second system call to be
        # read again once it came.
        self.handed = 0
        # Disarmed (and `busy`) until the acknowledging thread sent the answer: left so by
        # the worker that handed it over (the connection ended, or has messages read and
        # not yet answered) or by one that took it up meanwhile (the client sent more).
        # The acknowledging thread then arms it (or closes it, or starts its stream).
        self.held = False
        # What it received, sent and completed, not yet added to the server's `answers`:
        # counted by the worker that answers it without a lock, added at its close (or at
        # once with an error), and read with the rest by `PgServer.measures`.
        self.received = 0
        self.sent = 0
        self.queries = 0

    def start_tls(self, context: ssl.SSLContext) -> None:
        """Wrap the socket after 'S' went out; the reading thread does the handshake."""
        self.sock = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        self.transport.sock = self.sock  # the same file descriptor, now encrypted
        self.handshaking = True

    def send_first(self, out: bytes) -> None:
        """Send what the socket takes now of `out`, nothing being unsent before it; the
        rest waits in `unsent`. Raises OSError. Unlike `send_some`, `unsent` holds nothing
        while the send runs: the connection is armed meanwhile (an acknowledgement), and
        neither a worker nor the check for stalled clients may take the answer for one
        the client is slow to take."""
        sent = self.transport.send_now(out)
        if sent < len(out):
            self.unsent = out[sent:]
            self.unsent_since = time.monotonic()

    def send_some(self) -> None:
        """Send what the socket takes now of `unsent`, without waiting; raises OSError."""
        sent = self.transport.send_now(self.unsent)
        if sent == len(self.unsent):  # nearly always: nothing waits, no clock to read
            self.unsent = b""
            self.unsent_since = 0.0
            return
        if sent or not self.unsent_since:
            self.unsent_since = time.monotonic()
        self.unsent = self.unsent[sent:]

    def goodbye(self, data: bytes) -> None:
        """Send a last error if the socket takes it at once (it is non-blocking here)."""
        try:
            self.sock.send(data)
        except OSError:
            pass
