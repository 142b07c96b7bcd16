"""A client that takes its answer a byte at a time, never pausing long, then reads the rest
as fast as it can: what an answer's deadline as a whole (`refimpl.netpool.send_limits`)
cuts off, over either protocol."""

from __future__ import annotations

import socket
import time


def asked(port: int) -> socket.socket:
    """A loopback connection to `port` whose receive buffer is small (4 KB: an answer of
    megabytes waits on the server's side), a GET of / sent on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    return sock


def trickle_then_read(sock: socket.socket, trickle_seconds: float) -> tuple[int, bool]:
    """Take a byte every 200 ms for `trickle_seconds`, then read as fast as possible: the
    bytes received, and whether the server closed the connection (else it kept it open
    after the answer, and the read waited 5 s for more)."""
    got = 0
    sock.settimeout(5)
    stop = time.monotonic() + trickle_seconds
    while time.monotonic() < stop:
        got += len(sock.recv(1))
        time.sleep(0.2)
    try:
        while more := sock.recv(1 << 20):
            got += len(more)
    except TimeoutError:
        return got, False
    except ConnectionResetError:
        pass
    return got, True
