"""How many connections the server keeps open, and what a client past the limits is told.

A client past `max_connections` or `max_connections_per_address` gets a 503 with
`Retry-After` at once, and the connection closes: the workers and the epoll set never see it.
When the process runs out of file descriptors, `accept` fails with EMFILE while the client
waits in the kernel's queue; the listening socket stays readable, so a plain loop would spin.
A descriptor kept in reserve is then let go for an instant to accept and refuse that
client, and accepting pauses briefly.
"""

from __future__ import annotations

import os
import socket
import time

from refimpl.errors import TooManyConnections
from refimpl.http.error_answers import closing_answer
from refimpl.http.serving import wire
from refimpl.netlimits import (
    OUT_OF_DESCRIPTORS,
    ConnectionCounts,
    ConnectionLimits,
    raise_open_file_limit,
)

# The counts and limits are shared with the PostgreSQL protocol's server (refimpl.netlimits).
__all__ = [
    "OUT_OF_DESCRIPTORS",
    "ConnectionCounts",
    "ConnectionLimits",
    "DescriptorReserve",
    "raise_open_file_limit",
    "refuse",
]

OUT_OF_DESCRIPTORS_PAUSE = 0.05  # accepting waits this long after an EMFILE


def refuse(sock: socket.socket, message: str) -> None:
    """Answer a connection with a 503 at once, without waiting for its request, and close."""
    answer = closing_answer(TooManyConnections(message))
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
            refuse(sock, "the server has no file descriptors left for a connection; retry later")
        try:
            self._fd = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            pass  # taken meanwhile: the next EMFILE pauses without answering
        time.sleep(OUT_OF_DESCRIPTORS_PAUSE)  # the listening socket stays readable: no spin

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
