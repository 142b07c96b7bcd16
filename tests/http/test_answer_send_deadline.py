"""A client that takes its answer a byte at a time, never pausing long: the answer has a
deadline as a whole (`refimpl.netpool.send_limits`), past which its connection is closed and
the server logs it. Before, each pause was bounded (60 s) but the whole was not, so such a
client kept its connection and its answer's memory for as long as it liked.

Both ways a pooled server sends an answer: whole (the socket's rest kept with the connection,
no thread waiting), and in parts (a Werkzeug-style body, sent by its worker).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refimpl.http.encode import Answer
from refimpl.netpool import send_limits
from tests.http.conftest import pooled_server
from tests.netpool.slow_reader import asked, trickle_then_read

BIG = 16 * 1024 * 1024  # far more than the kernel's buffers of both ends hold
PIECE = 64 * 1024


def _whole(environ: dict, start_response: Callable[..., Any]) -> Any:
    return Answer(b"x" * BIG)(environ, start_response)


def _in_parts(environ: dict, start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])  # chunked: no length
    return (b"y" * PIECE for _ in range(BIG // PIECE))


@pytest.mark.parametrize("app", [_whole, _in_parts], ids=["whole", "in_parts"])
def test_an_answer_taken_too_slowly_is_cut_off_at_its_deadline(
    app: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The deadline: 1 s, whatever the size (the size's allowance made negligible).
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.0)
    monkeypatch.setattr(send_limits, "SEND_MIN_BYTES_PER_SECOND", 1e12)
    caplog.set_level(logging.WARNING, logger="refimpl.http")
    with pooled_server(app) as pooled:
        with asked(pooled.server_port) as sock:
            got, closed = trickle_then_read(sock, 4.0)
    assert closed, "the connection was kept open"
    assert got < BIG, "the whole answer went to a client slower than its deadline allows"
    assert any("not taken whole" in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.parametrize("app", [_whole, _in_parts], ids=["whole", "in_parts"])
def test_a_client_as_fast_as_the_allowance_gets_its_whole_answer(
    app: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short grace, but the size's allowance as the server has it: 16 MB get 256 s.
    monkeypatch.setattr(send_limits, "SEND_GRACE_SECONDS", 1.0)
    with pooled_server(app) as pooled:
        with asked(pooled.server_port) as sock:
            got, closed = trickle_then_read(sock, 2.0)
    assert not closed and got > BIG  # the answer and its head, the connection kept
