"""How many connections the server keeps open, and what a client past the limits is told.

A client past `max_connections` or `max_connections_per_address` gets a 503 with
`Retry-After` at once, and the connection closes: the workers and the epoll set never see it.
When the process runs out of file descriptors, `accept` fails with EMFILE while the client
waits in the kernel's queue; the listening socket stays readable, so a plain loop would spin.
A descriptor kept in reserve is then let go for an instant to accept and refuse that
client, and accepting pauses briefly.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import threading
import time
from dataclasses import dataclass

from refimpl.http.serving import wire

RETRY_AFTER_SECONDS = 1
OUT_OF_DESCRIPTORS_PAUSE = 0.05  # accepting waits this long after an EMFILE
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Open connections at most, in all and from one client address (503 above)."""

    total: int = 10_000
    per_address: int = 4096


class ConnectionCounts:
    """The open connections, in all and by client address; thread-safe."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._total = 0
        self._by_address: dict[str, int] = {}

    def admit(self, address: str) -> str | None:
        """Count a new connection from `address`; or the reason it is refused (not counted)."""
        with self._lock:
            if self._total >= self.limits.total:
                return (
                    f"the server has {self.limits.total} connections open, its limit"
                    " (max_connections); retry later"
                )
            held = self._by_address.get(address, 0)
            if held >= self.limits.per_address:
                return (
                    f"{address} has {held} connections open, the limit for one address"
                    " (max_connections_per_address); close some or retry later"
                )
            self._total += 1
            self._by_address[address] = held + 1
            return None

    def release(self, address: str) -> None:
        with self._lock:
            self._total -= 1
            left = self._by_address.get(address, 1) - 1
            if left:
                self._by_address[address] = left
            else:
                self._by_address.pop(address, None)


def refuse(sock: socket.socket, message: str) -> None:
    """Answer a connection with a 503 at once, without waiting for its request, and close."""
    answer = wire.error_answer(503, message, f"Retry-After: {RETRY_AFTER_SECONDS}\r\n")
    try:
        sock.send(answer, socket.MSG_DONTWAIT)
        sock.shutdown(socket.SHUT_WR)
        # What the client sent already is read, so that closing sends a FIN rather than a
        # reset, which could make the client's kernel drop the answer unread.
        sock.recv(wire.RECV_BYTES, socket.MSG_DONTWAIT)
    except OSError:
        pass
    sock.close()


class DescriptorReserve:
    """One file descriptor held back, to answer a client when the process has none left."""

    def __init__(self) -> None:
        self._fd: int | None = os.open(os.devnull, os.O_RDONLY)

    def refuse_one(self, listener: socket.socket) -> None:
        """After an EMFILE: accept one waiting client with the reserve, refuse it, pause."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            sock, _ = listener.accept()
        except OSError:
            pass
        else:
            refuse(sock, "the server has no file descriptors left for a connection; retry"
                   " later")  # fmt: skip
        try:
            self._fd = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            pass  # taken meanwhile: the next EMFILE pauses without answering
        time.sleep(OUT_OF_DESCRIPTORS_PAUSE)  # the listening socket stays readable: no spin

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def raise_open_file_limit() -> None:
    """Let the process open as many files as its hard limit allows (one per connection)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        pass  # not allowed here: the soft limit stays, and EMFILE is answered when reached
