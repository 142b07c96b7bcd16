"""The PostgreSQL protocol's server: sockets, one epoll set, statements on a worker pool.

One thread accepts connections and reads what they send, all from one epoll set, as the
HTTP server does: a connection is registered one-shot, so that while a worker answers it
nothing else reads it. A connection whose bytes make a whole message goes to the worker
pool (at most `threads` statements run at once); the worker answers every message it has,
sends the answer and re-arms the connection. An idle or half-sent connection thus holds no
thread, and none of the HTTP server's workers. Connection counts and limits are those of
the HTTP server (`refimpl.netlimits`): a client past `pg_max_connections` is told so with
SQLSTATE 53300 in answer to its startup message, and closed.

`stop()` stops accepting; running statements finish and are answered; every connection then
gets a FATAL 57P01 and is closed (an open transaction is rolled back).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import select
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from refimpl.engine.instance import Instance
from refimpl.netlimits import (
    OUT_OF_DESCRIPTORS,
    ConnectionCounts,
    ConnectionLimits,
    raise_open_file_limit,
)
from refimpl.pgwire import sqlstate
from refimpl.pgwire.link import Link, LinkOptions

log = logging.getLogger("refimpl.pgwire")

RECV_BYTES = 256 * 1024
POLL_SECONDS = 0.2  # how soon the reading thread notices a stop
# A connection must be logged in this long after it was accepted (PostgreSQL's
# authentication_timeout): one that never finishes its startup costs bounded descriptors.
STARTUP_TIMEOUT_SECONDS = 60.0
SEND_TIMEOUT_SECONDS = 60  # a client that takes no answer for this long is dropped
_ARMED = select.EPOLLIN | select.EPOLLONESHOT


@dataclass(frozen=True, slots=True)
class PgOptions:
    host: str = "127.0.0.1"
    port: int = 5432
    threads: int = 16
    limits: ConnectionLimits = field(default_factory=lambda: ConnectionLimits(
        100, 100, "pg_max_connections", "pg_max_connections"))  # fmt: skip
    link: LinkOptions = field(default_factory=LinkOptions)


class _Client:
    """One socket and its protocol link; `busy` while a worker answers it."""

    def __init__(self, sock: socket.socket, address: str, link: Link, counted: bool) -> None:
        self.sock = sock
        self.address = address
        self.counted = counted  # in the server's ConnectionCounts (a refused one is not)
        self.accepted_at = time.monotonic()
        self.link = link
        self.busy = False
        self.lock = threading.Lock()  # held by the worker while it answers


class PgServer:
    def __init__(self, instance: Instance, options: PgOptions) -> None:
        raise_open_file_limit()
        self.instance = instance
        self.options = options
        self.counts = ConnectionCounts(options.limits)
        self._listener = socket.create_server((options.host, options.port), backlog=512)
        self._listener.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._epoll = select.epoll()
        self._epoll.register(self._listener.fileno(), select.EPOLLIN)
        self._clients: dict[int, _Client] = {}  # by file descriptor
        self._by_process: dict[int, _Client] = {}
        self._lock = threading.Lock()
        self._process_ids = itertools.count(1)
        self._stopping = threading.Event()
        self._next_startup_check = 0.0
        self._pool = ThreadPoolExecutor(options.threads, thread_name_prefix="kdb-pg")
        self._reader = threading.Thread(target=self._read_loop, name="kdb-pg-read", daemon=True)

    def start(self) -> None:
        self._reader.start()

    # -- the reading thread --------------------------------------------------------------

    def _read_loop(self) -> None:
        listener = self._listener.fileno()
        while not self._stopping.is_set():
            try:
                events = self._epoll.poll(POLL_SECONDS)
            except OSError:
                return
            for fd, _ in events:
                if fd == listener:
                    self._accept()
                else:
                    self._readable(fd)
            self._end_late_startups()

    def _end_late_startups(self) -> None:
        now = time.monotonic()
        if now < self._next_startup_check:
            return
        self._next_startup_check = now + 1.0
        with self._lock:
            late = [c for c in self._clients.values() if not c.busy
                    and c.link.conversation is None
                    and now - c.accepted_at > STARTUP_TIMEOUT_SECONDS]  # fmt: skip
        for client in late:
            self._close(client)

    def _accept(self) -> None:
        try:
            sock, peer = self._listener.accept()
        except BlockingIOError:
            return
        except OSError as error:
            if error.errno in OUT_OF_DESCRIPTORS:
                log.warning("no file descriptor left for a PostgreSQL connection")
            return
        address = peer[0]
        refused = self.counts.admit(address)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", SEND_TIMEOUT_SECONDS, 0))  # fmt: skip
        process_id = next(self._process_ids)
        link = Link(self.instance, self.options.link, process_id, secrets.randbits(31),
                    self.cancel, refused)  # fmt: skip
        client = _Client(sock, address, link, counted=refused is None)
        with self._lock:
            self._clients[sock.fileno()] = client
            self._by_process[process_id] = client
        self._epoll.register(sock.fileno(), _ARMED)

    def _readable(self, fd: int) -> None:
        with self._lock:
            client = self._clients.get(fd)
        if client is None:
            return
        try:
            data = client.sock.recv(RECV_BYTES)
        except BlockingIOError:
            self._rearm(client)
            return
        except OSError:
            data = b""
        client.link.core.receive_data(data)
        if client.link.core.has_message():
            client.busy = True
            self._pool.submit(self._answer, client)
        else:
            self._rearm(client)

    # -- the workers ---------------------------------------------------------------------

    def _answer(self, client: _Client) -> None:
        link = client.link
        try:
            with client.lock:
                while True:
                    out = link.answer_pending()
                    if out:
                        client.sock.setblocking(True)
                        client.sock.sendall(out)
                        client.sock.setblocking(False)
                    if link.closed or not link.core.has_message():
                        break
        except OSError:
            link.end()
        except Exception:
            log.exception("bug: unexpected error answering a PostgreSQL connection")
            goodbye = link.refuse(sqlstate.INTERNAL, "internal error (a bug in the server);"
                                  " the server log has the details")  # fmt: skip
            try:
                client.sock.send(goodbye, socket.MSG_DONTWAIT)
            except OSError:
                pass
        client.busy = False
        if link.closed:
            self._close(client)
        else:
            self._rearm(client)

    def _rearm(self, client: _Client) -> None:
        try:
            self._epoll.modify(client.sock.fileno(), _ARMED)
        except (OSError, ValueError):
            self._close(client)

    def _close(self, client: _Client) -> None:
        with self._lock:
            fd = client.sock.fileno()
            if self._clients.pop(fd, None) is None:
                return
            self._by_process.pop(client.link.process_id, None)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass
        client.link.end()
        client.sock.close()
        if client.counted:
            self.counts.release(client.address)

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
        self._stopping.set()
        self._reader.join()
        try:
            self._epoll.unregister(self._listener.fileno())
        except (OSError, ValueError):
            pass
        self._listener.close()
        self._pool.shutdown(wait=True)
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            with client.lock:
                goodbye = client.link.refuse(
                    sqlstate.ADMIN_SHUTDOWN, "terminating connection: the server is stopping")
            try:
                client.sock.send(goodbye, socket.MSG_DONTWAIT)
            except OSError:
                pass
            self._close(client)
        self._epoll.close()
