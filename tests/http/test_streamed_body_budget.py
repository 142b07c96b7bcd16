"""A streamed body the server makes slowly: its deadline bounds the client's reading, never
the server's making (`refimpl.netpool.send_limits`). Before, it counted from the answer's
head, so a body made slower than the allowance (a slow query's rows) was cut off though its
client read at once, while a client that trickles is still cut off.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refimpl.netpool import send_limits
from tests.http.conftest import pooled_server
from tests.netpool.slow_reader import trickle_then_read

PART = 8 * 1024 * 1024  # more than the kernel buffers of both ends hold (4 MB): each waits
PARTS = 4
MAKING = 0.8  # the seconds the app takes to make each part: 3.2 s in all


def _made_slowly(environ: dict, start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])  # chunked: no length
    return _slow_parts()


def _slow_parts() -> Iterator[bytes]:
    for _ in range(PARTS):
        time.sleep(MAKING)
        yield b"z" * PART


def _ask(port: int) -> socket.socket:
    """A connection whose receive buffer is small, its request sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    return sock


@pytest.fixture
def two_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client may keep the server waiting 2 s in all, whatever the size (the size's
    allowance made negligible): less than the 3.2 s the app takes to make the body."""
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 2.0)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)


@pytest.mark.usefixtures("two_seconds")
def test_a_body_made_slowly_reaches_a_client_that_reads_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="refimpl.http")
    with pooled_server(_made_slowly) as pooled:
        with _ask(pooled.server_port) as sock:
            got, closed = trickle_then_read(sock, 0.0)
    assert not closed, "the connection was cut off"
    assert got > PARTS * PART  # the whole body and its head
    assert not any("not taken whole" in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.usefixtures("two_seconds")
def test_a_body_made_slowly_is_still_cut_off_from_a_client_that_trickles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="refimpl.http")
    with pooled_server(_made_slowly) as pooled:
        with _ask(pooled.server_port) as sock:
            got, closed = trickle_then_read(sock, 6.0)
    assert closed, "the connection was kept open"
    assert got < PARTS * PART
    assert any("not taken whole" in r.getMessage() for r in caplog.records), caplog.text
