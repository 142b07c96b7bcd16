"""A streamed answer to a client slower than the socket's buffer is sent whole whatever the
connection's file descriptor: a server holding more than 1,024 descriptors (event streams,
many clients; `netlimits` raises the process's limit for them) must wait for a socket
numbered past `select`'s FD_SETSIZE as for any other."""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.http.conftest import pooled_server

BIG = 8 * 1024 * 1024  # far more than the kernel's buffers of both ends hold
PIECE = 64 * 1024
HIGH = 1100  # past FD_SETSIZE (1,024)


def _in_parts(environ: dict, start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])  # chunked: no length
    return (b"y" * PIECE for _ in range(BIG // PIECE))


@pytest.fixture
def high_descriptors() -> Iterator[None]:
    """Every descriptor under HIGH taken, so that the next socket this process opens (the
    server's end of a connection, accepted in process) is numbered past FD_SETSIZE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HIGH + 100:
        pytest.skip(f"the open-file limit ({hard}) is under {HIGH + 100}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH + 100), hard))
    taken: list[int] = []
    try:
        while (fd := os.open(os.devnull, os.O_RDONLY)) < HIGH:
            taken.append(fd)
        os.close(fd)
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_slow_client_of_a_high_descriptor_gets_its_whole_streamed_answer(
    high_descriptors: None,
) -> None:
    with pooled_server(_in_parts) as pooled:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", pooled.server_port))
            sock.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            time.sleep(0.5)  # the worker finds the socket full and waits for it
            sock.settimeout(10)
            got = b""
            while not got.endswith(b"\r\n0\r\n\r\n"):
                more = sock.recv(1 << 20)
                if not more:
                    break
                got += more
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body.count(b"y") == BIG, "the answer was cut off"
