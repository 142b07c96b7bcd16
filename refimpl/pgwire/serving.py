"""The PostgreSQL protocol's server: sockets in one epoll set, answered by its workers.

The connections run on the HTTP server's mechanism (`refimpl.netpool.polling`): the
listening socket and every connection sit in one epoll set, registered one-shot, and the
worker the kernel wakes accepts, reads and answers there itself, with no thread between. Of
the `threads` workers, only the one that holds the admission place (`PLACES`) waits on the
set or runs statements, and at most `LONG_PLACES` more run costly ones; one whose statement
waits (a lock) or runs long hands its place on, and none waits for a commit's flush
(`refimpl.pgwire.acknowledging`). A worker reads what a connection sent; once the bytes
make a whole message it answers the messages there are, sends what the socket takes of the
answers and frees the connection: waiting for
messages, it stays registered edge-triggered, re-armed (`_rearm`) only when an event came
meanwhile, its last read may have left bytes or its end, or it waits for more. Answers
the socket did not take wait (pausing up to `SEND_TIMEOUT_SECONDS`, in all until their
deadline: `refimpl.netpool.send_limits`) with the connection armed for
writing only: its next messages are neither read nor answered meanwhile, and no worker
waits for it. A connection that pipelines without reading thus holds `UNSENT_LIMIT` bytes
of answers plus one answer at most. An idle or half-sent connection thus
holds no thread, and none of the HTTP server's workers; a running COPY FROM STDIN holds its
worker (not its place) while it reads the client's data from the socket (at most
`COPY_WAIT_SECONDS` between two reads).

Until it has logged in, a connection is counted apart: at most `unauthenticated_per_address`
from one client address (and `pg_max_connections` in all) wait for their login, each for at
most `login_timeout_s`, sending messages of at most `core.STARTUP_LIMIT` bytes. One past
those caps is told so (SQLSTATE 53300) and closed at once. Only a login takes one of the
`pg_max_connections` places (`refimpl.netlimits`, as the HTTP server's counts), the last
`reserved` of them for admins: clients that send nothing, or that cannot log in, thus never
keep a user, and never the admin, from logging in.

`stop()` stops accepting; running statements finish and are answered; every connection then
gets a FATAL 57P01 and is closed (an open transaction is rolled back).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import secrets
import select
import socket
import ssl
import struct
import threading
import time

from refimpl.engine import admission
from refimpl.engine.instance import Instance
from refimpl.engine.measures import PgCounts, PgMeasures
from refimpl.engine.rights import Principal
from refimpl.errors import KdbError
from refimpl.netlimits import (
    OUT_OF_DESCRIPTORS,
    ConnectionCounts,
    ConnectionLimits,
    raise_open_file_limit,
)
from refimpl.netpool.polling import ARMED, PollingWorkers
from refimpl.pgwire import overdue, postbox, sqlstate, tls
from refimpl.pgwire.acknowledging import Acknowledging
from refimpl.pgwire.clients import Client
from refimpl.pgwire.core import error_bytes
from refimpl.pgwire.link import Link
from refimpl.pgwire.options import PgOptions
from refimpl.pgwire.sockets import POLL_SECONDS, READ_BYTES, Socket, tls_pending
from refimpl.pgwire.states import CLOSED, READY, SECURING

log = logging.getLogger("refimpl.pgwire")

ACCEPTS_PER_EVENT = 64  # connections one wake-up of the listening socket takes at most
OUT_OF_DESCRIPTORS_PAUSE = 0.05  # accepting waits this long after an EMFILE
SEND_TIMEOUT_SECONDS = 60  # a client that takes no answer for this long is dropped
# A connection's answers not yet sent: past this, its next messages wait unread until the
# client has taken them. Its memory is thus this much plus one answer, however many
# messages it pipelines without reading.
UNSENT_LIMIT = 1024 * 1024
WRITABLE = select.EPOLLOUT | select.EPOLLONESHOT  # waiting for the client to read
READABLE_ONCE = select.EPOLLIN | select.EPOLLONESHOT  # ... for TLS's read of its record
# Waiting for messages: an event at each arrival of bytes, the registration kept (`_rearm`);
# the client's end of the stream shows in the mask of its last bytes' event (EPOLLRDHUP).
FOLLOWED = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET
ENDED = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR  # more to read than bytes
EVENTS_TAKEN = 4  # a worker's wait takes at most (`PollingWorkers`' `taken`)
# One worker answers the cheap requests in turn (`netpool.places`: a second one running at
# once cost each request a hand-over of the interpreter lock at its system calls, 1.6 to 2
# context switches a request against 1.2 to 1.5); a costly request moves to a long place
# beside it, so the cheap ones never wait behind it.
PLACES = 1
LONG_PLACES = 1
LOGIN_TIMED_OUT = "57014"  # query_canceled: PostgreSQL's "canceling authentication due to timeout"


class PgServer:
    def __init__(self, instance: Instance, options: PgOptions) -> None:
        raise_open_file_limit()
        self.instance = instance
        self.options = options
        self.counts = ConnectionCounts(options.limits)
        self.unauthenticated = ConnectionCounts(
            ConnectionLimits(
                options.limits.total,
                options.unauthenticated_per_address,
                f"{options.limits.total_setting}, for connections not yet logged in",
                "pg_max_unauthenticated_per_address",
            )
        )
        self.answers = PgCounts()  # queries, errors and bytes, for /metrics
        self._listener = socket.create_server((options.host, options.port), backlog=512)
        self._listener.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._clients: dict[int, Client] = {}  # by file descriptor
        self._by_process: dict[int, Client] = {}
        self._lock = threading.Lock()
        self._process_ids = itertools.count(1)
        self._next_startup_check = 0.0
        self._workers = PollingWorkers(
            "kdb-pg",
            options.threads,
            self._event,
            self._end_late_startups,
            POLL_SECONDS,
            PLACES,
            taken=EVENTS_TAKEN,
            on_left=self._left,
            long_places=LONG_PLACES,
        )
        self._epoll = self._workers.epoll
        self._stopping = self._workers.stopping
        self._epoll.register(self._listener.fileno(), ARMED)
        # Durable answers go to a worker to be sent (`_deliver`): the acknowledging thread
        # posts a round's at once, which rings once (`postbox`).
        self._durable: postbox.Postbox[tuple[tuple[Client, bytes], KdbError | None]] = (
            postbox.Postbox()
        )
        self._epoll.register(self._durable.fileno(), postbox.EVENTS)
        # Looked at for every event: kept as numbers (both stay open until the stop).
        self._listener_fd, self._durable_fd = self._listener.fileno(), self._durable.fileno()
        self._acknowledging: Acknowledging[tuple[Client, bytes]] = Acknowledging(self._durable.post)

    def start(self) -> None:
        self._workers.start()

    # -- on the worker the kernel woke ---------------------------------------------------

    def _deliver(self) -> None:
        """Send the durable answers posted (each once, in order); the ring stays armed
        (`postbox.EVENTS`), and what is posted at the stop, `stop` sends."""
        for handed, error in self._durable.take():
            self._acknowledge(handed, error)

    def _end_late_startups(self) -> None:
        """End the connections overdue (`overdue.look`): not logged in in time, taking no
        answers, or idle in a transaction too long (its transaction rolled back)."""
        now = time.monotonic()
        if now < self._next_startup_check:
            return
        with self._lock:
            if now < self._next_startup_check:
                return  # another worker took this round
            found = overdue.look(
                self._clients.values(), now, self.options.login_timeout_s, SEND_TIMEOUT_SECONDS
            )
            self._next_startup_check = found.next_look
            for client in found.all():
                client.busy = True  # no worker takes it up while it is closed
        for client in found.stalled:
            self._close(client)  # its answers wait unread: it is gone, or reads nothing
        for client in found.late:
            self._refuse(
                client,
                LOGIN_TIMED_OUT,
                f"the connection did not log in within {self.options.login_timeout_s:g}"
                " seconds (pg_login_timeout_s); send the startup and the password at once",
            )
            self._close(client)
        for client, timeout in found.idle:
            log.info("ended the idle session in a transaction of %s", client.address)
            self._refuse(
                client, overdue.IDLE_IN_TRANSACTION_TIMEOUT, overdue.idle_timed_out(timeout)
            )
            self._close(client)  # its transaction is rolled back: the writers go on

    def _refuse(self, client: Client, code: str, message: str) -> None:
        """End a connection with a FATAL error, counted for /metrics like every answer."""
        refusal = client.link.refuse(code, message)
        self.answers.answered(refusal)
        client.goodbye(refusal)

    def _accept_some(self) -> None:
        """Accept what waits (a bounded number), then re-arm the listening socket."""
        for _ in range(ACCEPTS_PER_EVENT):
            try:
                sock, peer = self._listener.accept()
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno in OUT_OF_DESCRIPTORS:
                    log.warning("no file descriptor left for a PostgreSQL connection")
                    # The client waits in the kernel's queue, the socket stays readable:
                    # pause (giving the place on) rather than spin on it.
                    admission.waiting()
                    time.sleep(OUT_OF_DESCRIPTORS_PAUSE)
                break
            self._admit(sock, peer[0])
        if not self._stopping.is_set():
            try:
                self._epoll.modify(self._listener.fileno(), ARMED)
            except (OSError, ValueError):
                pass  # stopped meanwhile

    def _admit(self, sock: socket.socket, address: str) -> None:
        refused = self.unauthenticated.admit(address)
        sock.setblocking(False)
        if refused is not None:
            # Told at once and closed: a client that may not even wait for its login is
            # given no buffer, no state and no place in the epoll set.
            refusal = error_bytes(sqlstate.TOO_MANY_CONNECTIONS, refused)
            self.answers.answered(refusal)
            try:
                sock.send(refusal)
            except OSError:
                pass
            sock.close()
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT_SECONDS, 0)
        )
        process_id = next(self._process_ids)
        transport = Socket(sock, self._stopping, self.answers)
        link = Link(
            self.instance,
            self.options.link,
            process_id,
            secrets.randbits(31),
            self.cancel,
            transport,
            lambda principal: self._log_in(client, principal),
            lambda: self._wake(client),
        )
        link.peer = address
        client = Client(transport, address, link)
        client.followed = True
        with self._lock:
            self._clients[sock.fileno()] = client
            self._by_process[process_id] = client
        self._epoll.register(sock.fileno(), FOLLOWED)

    def _log_in(self, client: Client, principal: Principal) -> str | None:
        """Move a connection whose password was right to the logged-in count; or why not."""
        refused = self.counts.admit(client.address, privileged=principal.is_admin)
        if refused is None:
            with self._lock:
                client.logged_in = True
            self.unauthenticated.release(client.address)
        return refused

    def _left(self, fd: int, mask: int) -> None:
        """An event a worker took but does not answer (its place went on): modified, the
        registration reports it again (`PollingWorkers`' `on_left`). The eventfd's count is
        never read; a connection's bytes, end or writable socket are there still."""
        with self._lock:  # as `_rearm`'s: `followed` says what the last modify set
            client = self._clients.get(fd)
            if client is not None and client.busy:
                self._missed(client, fd)
                return
            if client is not None:
                events = FOLLOWED if client.followed else ARMED | select.EPOLLOUT
            elif fd == self._durable_fd or fd == self._listener_fd:
                events = postbox.EVENTS if fd == self._durable_fd else ARMED
            else:
                return  # closed meanwhile
            try:
                self._epoll.modify(fd, events)
            except (OSError, ValueError):
                pass  # closed meanwhile

    def _missed(self, client: Client, fd: int) -> None:
        """An event for `client` while a worker answers it (`_lock` held). Its worker's
        `_rearm` arms it again for this event; a second (a COPY or a walsender reads on)
        disarms it till then. The first, nearly always a next message sent as the answer
        went out, is alone: no system call for it."""
        if client.missed and client.followed:
            client.followed = False
            try:
                self._epoll.modify(fd, select.EPOLLONESHOT)
            except (OSError, ValueError):
                pass  # closed meanwhile
        client.missed = True

    def _event(self, fd: int, mask: int) -> None:
        """An event of the epoll set: a connection's (read, answered, freed), the durable
        answers' ring or the listening socket's; a connection's first, looked up once."""
        with self._lock:
            client = self._clients.get(fd)
            if client is not None:
                if client.busy:
                    self._missed(client, fd)
                    return
                client.busy = True
        if client is None:
            if fd == self._durable_fd:
                self._deliver()
            elif fd == self._listener_fd:
                self._accept_some()
            return
        if client.handshaking and not self._handshake(client):
            return
        if client.unsent:
            try:
                client.send_some()
            except OSError:
                self._close(client)
                return
            if client.unsent:  # still more than the client takes: read nothing new yet
                self._rearm(client, WRITABLE)
                return
        link = client.link
        core = link.core
        # A whole message left by the last answers (`link.more`, kept while logged in):
        # answered before anything is read, so the buffer stays small.
        if (link.more or core.state is not READY) and core.has_message():
            if mask & ENDED:
                client.drained = False  # its end is still to read: `_rearm` modifies
            self._answer(client)  # messages read before come first: the buffer stays small
            return
        data: bytes | None
        try:
            data = client.sock.recv(READ_BYTES)
            if client.secure:  # TLS: decrypted bytes epoll cannot see
                while pending := tls_pending(client.sock):
                    data += client.sock.recv(pending)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            data = None  # nothing new; messages read before may wait (`_acknowledge`)
        except OSError:
            data = b""
        # A short read leaves no byte, but maybe the end that came with them (one event).
        client.drained = not mask & ENDED and (data is None or len(data) < READ_BYTES)
        if data is not None:
            client.received += len(data)
            core.receive_data(data)
        if core.has_message():
            self._answer(client)
        else:
            self._notify(client)

    def _notify(self, client: Client) -> None:
        """Send an idle connection the notifications that wait for it, then re-arm it."""
        out = client.link.notifications()
        if out:
            self._count(client, len(out))
            client.unsent = out
            try:
                client.send_some()
            except OSError:
                client.link.end()
        if client.link.closed:
            self._close(client)
        else:
            self._rearm(client, WRITABLE if client.unsent else ARMED)

    def _wake(self, client: Client) -> None:
        """Notifications arrived for `client` (any thread): a worker visits it now, unless
        one is answering it already (whose `_rearm` looks for them)."""
        if not client.busy and client.link.notifications_waiting():
            with self._lock:  # as `_rearm`'s: `followed` says what the last modify set
                client.followed = False
                try:
                    self._epoll.modify(client.sock.fileno(), ARMED | select.EPOLLOUT)
                except (OSError, ValueError):
                    pass  # closed meanwhile

    def _handshake(self, client: Client) -> bool:
        """Move a TLS handshake on; True once it is done (the startup may follow at once),
        False once the connection is closed or re-armed for the handshake's next step (and
        no longer `busy`: the worker the next flight wakes takes it on)."""
        step = tls.step(client.sock)  # type: ignore[arg-type]  # wrapped by start_tls
        if step is tls.Step.DONE:
            client.handshaking = False
            client.link.core.secured()
            return True
        if step is tls.Step.FAILED:
            self._close(client)
        else:
            # Free before re-armed, as `_rearm` does: a flight that wakes another worker
            # between the two would find the connection busy, and its one-shot event lost.
            client.busy = False
            try:
                self._epoll.modify(client.sock.fileno(), tls.EVENTS[step])
            except (OSError, ValueError):
                self._close(client)
        return False

    def _answer(self, client: Client) -> None:
        # What it runs is long from here (`admission.running_long`), not from when this
        # worker took its place: that one kept polling for seconds made every statement
        # that looked at its time long, and remembered its shape as costly.
        admission.request_started()
        link = client.link
        core = link.core
        try:
            with client.lock:
                while True:
                    out = link.answer_pending(UNSENT_LIMIT)
                    self._count(client, len(out))
                    # Its state read once a pass (not `link.closed`, a property): sending
                    # changes it only by raising, which ends the connection below.
                    closed = core.state is CLOSED
                    if out:
                        if not link.is_durable():
                            # It acknowledges a commit not yet on disk: sent after the flush.
                            self._acknowledging.hand_over(
                                (client, out), link.wait_durable, link.is_durable
                            )
                            return
                        if closed:
                            client.transport.send(out)  # its last words, then it closes
                        else:
                            # Nothing waits unsent here (`_event` sent it first): one
                            # send, and the clock read only when the socket took a part.
                            sent = client.transport.send_now(out)
                            if sent != len(out):
                                client.keep_unsent(out[sent:])
                    if client.unsent or closed or not link.more:
                        break
                if core.state is SECURING and self.options.tls is not None:
                    client.start_tls(self.options.tls)
        except OSError:
            link.end()
        except Exception:
            log.exception("bug: unexpected error answering a PostgreSQL connection")
            self._refuse(
                client,
                sqlstate.INTERNAL,
                "internal error (a bug in the server); the server log has the details",
            )
        if core.state is CLOSED:
            self._close(client)
        elif link.replication is not None and link.walsender() is not None:
            self._stream(client)
        else:
            self._rearm(client, WRITABLE if client.unsent else ARMED)

    def _count(self, client: Client, size: int) -> None:
        """Count `size` bytes of answers about to go to `client`; an error its core sent
        moves its counts to the server's at once (its statements completed are counted by
        its core, and taken at its close or with an error)."""
        client.sent += size
        if client.link.core.errors:  # rare: counted by SQLSTATE at once
            with self._lock:
                self._add_counts(client)

    def _add_counts(self, client: Client) -> None:
        """Move `client`'s counts to the server's (`_lock` held: `measures` sees them once)."""
        queries, errors = client.link.core.take_counts()
        self.answers.received(client.received)
        self.answers.sent(client.sent, queries, errors)
        client.received = client.sent = 0

    def _stream(self, client: Client) -> None:
        """START_REPLICATION: streamed on a thread of its own (`Client.stream`), then the
        connection is re-armed, or closed."""
        client.stream(
            lambda: self._close(client), lambda: self._rearm(client, ARMED | select.EPOLLOUT)
        )

    def _acknowledge(self, handed: tuple[Client, bytes], error: KdbError | None) -> None:
        """An answer's commits are on disk (or the log failed): send it without waiting
        (on the worker the postbox woke, or at the stop).

        What the socket does not take, and messages that arrived meanwhile, are left to a
        worker: armed for writing as well, the connection is ready for one at once."""
        client, out = handed
        link = client.link
        core = link.core
        with client.lock:
            if error is not None:
                self._refuse(client, sqlstate.sqlstate_of(error), error.message)
            elif core.state is CLOSED:
                client.goodbye(out)  # its last answers: sent if the socket takes them
            else:
                try:
                    sent = client.transport.send_now(out)
                    if sent != len(out):  # rare: the rest waits for the client to take it
                        client.keep_unsent(out[sent:])
                except OSError:
                    link.end()
        if core.state is CLOSED:
            self._close(client)
        elif client.unsent:
            self._rearm(client, WRITABLE)
        elif link.more:  # as its answers left it: nothing was read since
            self._rearm(client, ARMED | select.EPOLLOUT)
        else:
            self._rearm(client)

    def _rearm(self, client: Client, events: int = ARMED) -> None:
        """Free `client` for the next event of `events` (ARMED: its next messages). One left
        `followed` needs no system call: every byte, and the stream's end, that came after
        its last read raised an event, taken later or while it was `busy` (`missed`). It is
        modified (firing at once for what is there) when bytes or its end may be left
        unread (`drained`; TLS's records), or for other events."""
        with self._lock:  # freed and modified in one hold: an event that fires waits for it
            client.busy = False
            missed, client.missed = client.missed, False
            if events == WRITABLE and client.transport.wants_read:
                events = READABLE_ONCE  # writable it is: waiting for that would spin
            elif events == ARMED:  # kept (0): no system call
                kept = client.followed and client.drained and not (missed or client.secure)
                events = 0 if kept else FOLLOWED
            if events:
                client.followed = events == FOLLOWED
                try:
                    self._epoll.modify(client.sock.fileno(), events)
                except (OSError, ValueError):
                    events = -1
        if events < 0:
            self._close(client)
        elif client.link.notifications_waiting():  # looked at once free, as `_wake` does
            self._wake(client)

    def _close(self, client: Client) -> None:
        with self._lock:
            fd = client.sock.fileno()
            if self._clients.pop(fd, None) is None:
                return
            self._add_counts(client)
            self._by_process.pop(client.link.process_id, None)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass
        client.link.end()
        client.sock.close()
        if client.logged_in:
            self.counts.release(client.address)
        else:
            self.unauthenticated.release(client.address)

    def measures(self) -> PgMeasures:
        """What /metrics reads at a scrape: the counts, and the connections by state now."""
        with self._lock:
            clients = list(self._clients.values())
            states = collections.Counter(c.state() for c in clients)
            measures = self.answers.snapshot(states)
            # Read without their workers' lock: a count a worker is adding to now is read as
            # it was or as it is, and counted once either way.
            received = sum(c.received for c in clients)
            sent = sum(c.sent for c in clients)
            queries = sum(c.link.core.untaken() for c in clients)
        return dataclasses.replace(
            measures,
            queries=measures.queries + queries,
            bytes_received=measures.bytes_received + received,
            bytes_sent=measures.bytes_sent + sent,
        )

    # -- cancel and stop -----------------------------------------------------------------

    def cancel(self, process_id: int, secret_key: int) -> None:
        """A CancelRequest: the connection's running statement stops (keys must match)."""
        with self._lock:
            client = self._by_process.get(process_id)
        if client is None or not secrets.compare_digest(
            client.link.secret_key.to_bytes(4, "big"), secret_key.to_bytes(4, "big", signed=True)
        ):
            return  # as PostgreSQL: nothing tells the sender whether it matched
        client.link.cancel()

    def stop(self) -> None:
        """Stop accepting, let running statements finish, end every connection."""
        self._workers.stop()
        try:
            self._epoll.unregister(self._listener.fileno())
        except (OSError, ValueError):
            pass
        self._listener.close()
        self._workers.join()  # each finishes the statements it answers
        self._acknowledging.close()  # and their acknowledgements are posted
        for handed, error in self._durable.take():
            self._acknowledge(handed, error)  # and sent
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            with client.lock:
                goodbye = client.link.refuse(
                    sqlstate.ADMIN_SHUTDOWN, "terminating connection: the server is stopping"
                )
            self.answers.answered(goodbye)
            client.goodbye(goodbye)
            self._close(client)
        self._epoll.close()
        self._durable.close()
