"""What the tests of a connection's repeated requests share (`serving.repeats`): a reader
fed two requests, with and without the repeat's shortcut, and a stand-in app and server for
a `Connection` served directly."""

from __future__ import annotations

import io
import socket
from collections.abc import Sequence
from typing import Any

from refimpl.errors import MalformedRequest
from refimpl.http.encode import Answer
from refimpl.http.request_input import WHOLE_BODY_KEY
from refimpl.http.route_memo import MEMO_KEY
from refimpl.http.serving import wire
from refimpl.http.serving.connection import Connection
from refimpl.http.serving.environ import make_environ
from tests.http.loopback_connection import connected

# The socket of the readers fed here, which never read from it.
_UNUSED = socket.socket()
FOLLOWING = b"POST /exec HTTP/1.1\r\nHost: h\r\nContent-Length: 8\r\n\r\nSELECT 1"


def shown(items: Any) -> list[object]:
    """What a reader made, as plain values to compare."""
    out: list[object] = []
    for item in items:
        if isinstance(item, wire.ReceivedRequest):
            head = item.head
            body = item.body.read()
            out.append(
                (head.method, head.target, head.version, dict(head.fields), head.keep_alive)
                + (item.body_length, item.has_body, item.data, body)
            )
        elif isinstance(item, MalformedRequest):
            out.append((type(item).__name__, str(item)))
        else:
            out.append(item)
    return out


def after(first: bytes, then: bytes, *, repeats: bool) -> tuple[list[object], bool, list[object]]:
    """What a reader makes of `then` after `first` (each as one receive), whether it took
    `then` as a repeat of `first`, and what it makes of a request after both (where its
    parser was left)."""
    reader = wire.RequestReader(_UNUSED, 1 << 20)  # fed here: its socket is never read
    reader.take(first) if repeats else reader.feed(first)
    fields = [r.head.fields for r in reader.ready if isinstance(r, wire.ReceivedRequest)]
    reader.ready.clear()
    reader.take(then) if repeats else reader.feed(then)
    got = list(reader.ready)
    taken = any(
        isinstance(item, wire.ReceivedRequest) and item.head.fields is f
        for item in got
        for f in fields
    )
    reader.ready.clear()
    reader.take(FOLLOWING) if repeats else reader.feed(FOLLOWING)
    return shown(got), taken, shown(reader.ready)


def as_parsed(first: bytes, then: bytes) -> bool:
    """Asserts that what a reader makes of `then` after `first` with the repeat's shortcut
    is what its parser makes of them, the parser left where it would be (a request after
    both made the same); answers whether the shortcut took `then` as a repeat."""
    fast, taken, next_fast = after(first, then, repeats=True)
    full, _, next_full = after(first, then, repeats=False)
    assert fast == full, then
    assert next_fast == next_full, then  # the parser is where it would be
    return taken


class Recorder:
    """An app that keeps each request's environ as it came, then adds to it, and answers."""

    def __init__(self) -> None:
        self.environs: list[dict[str, Any]] = []

    def answer(self, environ: dict[str, Any]) -> Answer:
        self.environs.append(dict(environ))
        environ["refimpl.added"] = True  # what an app adds is not a repeat's
        return Answer(b"ok", 200, "text/plain")


def served(app: Recorder, sent: Sequence[bytes]) -> Connection:
    """A connection (closed) that was sent each of `sent` in turn over loopback, each
    served by `app` before the next was sent."""
    connection, theirs = connected(app)
    try:
        for data in sent:
            theirs.sendall(data)
            assert connection.request_ready()
            assert connection.serve_one()
    finally:
        connection.close()
        theirs.close()
    return connection


def assert_parsed_environ(
    environ: dict[str, Any], data: bytes, connection: Connection, memo: object
) -> None:
    """`environ` (as the app got it) is the one the parser's request of `data` makes on
    `connection`, its whole body and the connection's credentials added, with the route's
    note `memo`; its input a stream the app read."""
    reader = wire.RequestReader(socket.socket())
    reader.feed(data)
    (parsed,) = reader.ready
    reader.sock.close()
    assert isinstance(parsed, wire.ReceivedRequest)
    expected = make_environ(parsed, connection.environ_base)
    expected.update(
        {WHOLE_BODY_KEY: parsed.data or b"", "refimpl.credentials": connection.credentials}
    )
    expected[MEMO_KEY] = memo
    got = dict(environ)
    assert isinstance(got.pop("wsgi.input"), io.BytesIO)  # read from by the app, closed
    expected.pop("wsgi.input")
    assert got[WHOLE_BODY_KEY] == data[len(data) - parsed.body_length :]
    assert got == expected
