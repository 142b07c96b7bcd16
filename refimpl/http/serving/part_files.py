"""A large part many streams share, sent to each of their sockets without copying its bytes.

A fan-out round hands one part to a thousand streams (`PooledWSGIServer._send_shared`).
While commits come faster than rounds, a part carries hundreds of commits' events (about
190 KB in `tools/bench/stream.py`'s throughput phases), and a send() copies all of them into
every socket: the largest kernel cost of the round. Written once into a memory file, the part
goes to each socket by sendfile(), which hands the socket references to the file's pages
instead: the copying is done once, not once a stream. The pages stay as they are as long as a
socket's queue holds them, since a file is written once and never again (each part has its
own).

Small parts gain nothing (the system call costs the same, and the file three more a round),
so only parts of ZERO_COPY_BYTES and more go this way (measured with
`tools/bench/stream_sends.py --sendfile`).

sendfile() has no MSG_DONTWAIT: a socket sent a part this way is made non-blocking for the
rest of its stream (`send`), which every other send of a stream is anyway; the server makes it
blocking again when the stream ends and its connection takes requests again (`blocking`).
"""

from __future__ import annotations

import os
import socket

# Parts at least this long are sent from a memory file. CPU time a stream against send()'s,
# 1,000 loopback sockets (stream_sends.py --sendfile, load 11-13): 8 KB 0.98, 16 KB 0.91,
# 32 KB 0.82, 48 KB 0.73 to 0.76, 64 KB 0.71, 128 KB 0.87, 192 KB 0.92, 256 KB 0.97; 200 B 1.11.
ZERO_COPY_BYTES = 32 * 1024


class PartFile:
    """`data` in a memory file of its own, to send to many sockets; `close` it after."""

    __slots__ = ("_fd", "_size")

    def __init__(self, data: bytes) -> None:
        self._fd = os.memfd_create("kdb-stream-part")
        self._size = len(data)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except BaseException:
            os.close(self._fd)
            raise

    @classmethod
    def of(cls, data: bytes) -> PartFile | None:
        """A file for `data` when it is long enough to gain by it; else None, and also when
        the system has no memory files or cannot make one now (out of descriptors or
        memory): send the bytes, as they must go out anyway."""
        if len(data) < ZERO_COPY_BYTES or not hasattr(os, "memfd_create"):
            return None
        try:
            return cls(data)
        except OSError:
            return None

    def send(self, sock: socket.socket) -> int:
        """As `sock.send(data, MSG_DONTWAIT)`: the bytes the socket took from the start of
        the part (BlockingIOError when none). `sock` is non-blocking from now on."""
        if sock.gettimeout() != 0.0:
            sock.setblocking(False)
        return os.sendfile(sock.fileno(), self._fd, 0, self._size)

    def close(self) -> None:
        """The file goes once the sockets' queues let go of its pages."""
        os.close(self._fd)


def blocking(sock: socket.socket) -> None:
    """`sock` blocking again (as a connection's is between its requests), if `send` made it
    non-blocking."""
    if sock.gettimeout() == 0.0:
        sock.settimeout(None)
