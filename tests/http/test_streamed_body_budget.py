"""A streamed body the server makes slowly: its deadline bounds the client's reading, never
the server's making (`refimpl.netpool.send_limits`). Before, it counted from the answer's
head, so a body made slower than the allowance (a slow query's rows) was cut off though its
client read at once, while a client that trickles is still cut off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refimpl.netpool import send_limits
from tests.http.conftest import pooled_server
from tests.netpool.slow_reader import asked, trickle_then_read

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


@pytest.fixture
def two_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client may keep the server waiting 2 s in all, whatever the size (the size's
    allowance made negligible): less than the 3.2 s the app takes to make the body."""
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 2.0)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)


@pytest.mark.usefixtures("two_seconds")
@pytest.mark.parametrize(
    ("trickle", "cut_off"), [(0.0, False), (6.0, True)], ids=["reads_at_once", "trickles"]
)
def test_a_body_made_slowly_is_cut_off_only_from_a_client_that_trickles(
    trickle: float, cut_off: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="refimpl.http")
    with pooled_server(_made_slowly) as pooled:
        with asked(pooled.server_port) as sock:
            got, closed = trickle_then_read(sock, trickle)
    assert closed == cut_off, "cut off" if closed else "kept open"
    assert (got > PARTS * PART) != cut_off  # the whole body and its head, or less
    logged = any("not taken whole" in r.getMessage() for r in caplog.records)
    assert logged == cut_off, caplog.text
