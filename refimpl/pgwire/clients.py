"""A PostgreSQL connection as the server's workers hold it (`refimpl.pgwire.serving`, one
a connection): its socket and protocol link, whether a worker answers it, the answers its
client has not taken yet, and its counts for /metrics."""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable

from refimpl.netpool import send_limits
from refimpl.pgwire.link import Link
from refimpl.pgwire.sockets import Socket

log = logging.getLogger("refimpl.pgwire")


class Client:
    """One socket and its protocol link; `busy` while a worker answers it."""

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
        # Its registration in the epoll set while it waits for messages is edge-triggered
        # and stays (`serving.FOLLOWED`), so a worker done with it frees it without a
        # system call when nothing came meanwhile: `followed` while so registered, `missed`
        # when an event came while `busy` (dropped then), `drained` when the last read took
        # less than it asked for and the client's end did not come with it (EPOLLRDHUP in
        # the event's mask): nothing was left unread, so no edge is owed.
        self.followed = False
        self.missed = False
        self.drained = True
        # Answers the socket did not take at once: while there are any, nothing more is
        # read or answered, so a client that reads nothing holds one answer at most.
        self.unsent = b""
        self.unsent_since = 0.0  # when the client last took some of them
        # By when they must all have been taken, however the client takes them: set when
        # they are left (`send_limits`; nothing more is answered until they are taken).
        self.unsent_deadline = 0.0
        self.handshaking = False  # TLS: 'S' sent, the handshake not yet done
        self.secure = False  # TLS: the socket is wrapped (`start_tls`)
        self.lock = threading.Lock()  # held by the worker while it answers
        # What it received and sent, not yet added to the server's `answers` (with the
        # statements its core completed, `ProtocolCore.take_counts`): counted by the worker
        # that answers it without a lock, added at its close (or at once with an error),
        # and read with the rest by `PgServer.measures`.
        self.received = 0
        self.sent = 0

    def state(self) -> str:
        """Its state as /metrics counts connections: startup, active, idle, ..."""
        conversation = self.link.conversation
        if conversation is None:
            return "startup"
        if self.busy:
            return "active"
        status = conversation.status
        if status == "I":
            return "idle"
        return "idle_in_transaction" if status == "T" else "idle_in_failed_transaction"

    def start_tls(self, context: ssl.SSLContext) -> None:
        """Wrap the socket after 'S' went out; the reading thread does the handshake."""
        self.sock = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        self.transport.sock = self.sock  # the same file descriptor, now encrypted
        self.handshaking = self.secure = True

    def send_some(self) -> None:
        """Send what the socket takes now of `unsent`, without waiting; raises OSError."""
        sent = self.transport.send_now(self.unsent)
        if sent == len(self.unsent):  # nearly always: nothing waits, no clock to read
            self.unsent = b""
            self.unsent_since = 0.0
            return
        if not self.unsent_since:  # left now: its deadline counts from here
            self.unsent_deadline = send_limits.send_deadline(time.monotonic(), len(self.unsent))
        if sent or not self.unsent_since:
            self.unsent_since = time.monotonic()
        self.unsent = self.unsent[sent:]

    def keep_unsent(self, rest: bytes) -> None:
        """Keep what the socket did not take of answers just sent (nothing waited before)."""
        self.unsent, self.unsent_since = rest, time.monotonic()
        self.unsent_deadline = send_limits.send_deadline(self.unsent_since, len(rest))

    def stalled(self, now: float, pause: float) -> bool:
        """True when answers wait that the client took nothing of for `pause` seconds, or
        not all of by their deadline (logged: the server closes the connection)."""
        if not self.unsent:
            return False
        if now > self.unsent_deadline:
            log.warning(
                "closed the connection from %s: its answers were not taken whole by their"
                " deadline (%d bytes left)",
                self.address,
                len(self.unsent),
            )
            return True
        return now - self.unsent_since > pause

    def goodbye(self, data: bytes) -> None:
        """Send a last error if the socket takes it at once (it is non-blocking here)."""
        try:
            self.sock.send(data)
        except OSError:
            pass

    def stream(self, close: Callable[[], None], resume: Callable[[], None]) -> None:
        """START_REPLICATION: a thread of its own streams to the client (which stays `busy`,
        so no worker reads its socket), then `resume`s the connection or `close`s it."""
        walsender = self.link.walsender()
        assert walsender is not None

        def run() -> None:
            try:
                if self.unsent:  # answers before START_REPLICATION go first
                    self.transport.send(self.unsent)
                    self.unsent = b""
                ending = walsender.run(self.transport)
            except OSError:
                ending = None
            except Exception:
                log.exception("bug: unexpected error streaming to a replication client")
                ending = None
            if ending is None or ending.back is None or self.link.closed:
                close()
            else:
                self.link.resume_after_stream(ending.back)
                resume()

        name = f"kdb-walsender-{self.link.process_id}"
        threading.Thread(target=run, name=name, daemon=True).start()
