"""A whole answer sent by a connection (`Connection._send_answer`): whatever its size (a large
body goes out after its head uncopied) and however little the client's socket takes at once,
what was sent and what waits for the client to take (`Connection.rest`) are, in order, the
bytes of `wire.answer_bytes`."""

from __future__ import annotations

import re
import socket
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.http.encode import Answer
from refimpl.http.serving import wire
from refimpl.http.serving.connection import SPLIT_BODY_BYTES
from tests.http.loopback_connection import connected


def _received(theirs: socket.socket, size: int) -> bytes:
    """What the client got: every byte the server's socket took (`size` of them)."""
    data = b""
    while len(data) < size:
        data += theirs.recv(1 << 20)
    return data


def _dated(data: bytes) -> bytes:
    return re.sub(rb"\r\nDate: [^\r]*\r\n", b"\r\nDate: -\r\n", data, count=1)


@settings(max_examples=25, deadline=None)
@given(
    size=st.sampled_from([0, 10, SPLIT_BODY_BYTES - 1, SPLIT_BODY_BYTES, 3 * SPLIT_BODY_BYTES]),
    method=st.sampled_from(["GET", "HEAD"]),
    small_buffer=st.booleans(),
    seed=st.integers(0, 255),
)
def test_a_whole_answer_is_its_head_then_its_body(
    size: int, method: str, small_buffer: bool, seed: int
) -> None:
    body = bytes((seed + i) % 256 for i in range(size))
    answer = Answer(body, 200, "application/octet-stream")

    def app(environ: dict[str, Any], start_response: Any) -> Answer:
        return answer

    connection, theirs = connected(app)
    if small_buffer:  # the socket takes part of a large answer: the rest waits
        connection.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    try:
        theirs.sendall(f"{method} /x HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        assert connection.request_ready()
        assert connection.serve_one()
        rest = bytes(connection.rest)
        expected = wire.answer_bytes(answer, True, method != "HEAD")
        sent = _received(theirs, len(expected) - len(rest))
        # The Date header is the clock's second when the head was made, here and there.
        assert _dated(sent + rest) == _dated(expected)
        if small_buffer and method == "GET" and size >= SPLIT_BODY_BYTES:
            assert rest  # the case of a client that took only part of it was met
    finally:
        connection.close()
        theirs.close()
