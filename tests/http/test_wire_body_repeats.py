"""An `/exec` client's next statement (its head again but the digits of its Content-Length,
then that many bytes) taken without the parser: exactly the request the parser makes of the
same bytes, or not taken at all."""

from __future__ import annotations

import socket
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.http.route_memo import MEMO_KEY
from refimpl.http.serving import wire
from refimpl.http.serving.repeats import BodyRepeat
from tests.http.repeated_requests import (
    FOLLOWING,
    Recorder,
    after,
    as_parsed,
    assert_parsed_environ,
    served,
)

# Real /exec heads: the bench's client (its Content-Length last), and one with it first,
# blanks after its digits and a header after it.
HEADS = [
    (
        b"POST /exec HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer kdb_abcdefghijklmnopqrstuvwxyz\r\nContent-Type: text/plain\r\n"
        b"Content-Length: %d\r\n\r\n"
    ),
    (
        b"POST /exec?db=demo HTTP/1.1\r\ncontent-length:%d \t\r\nHost: h\r\n"
        b"Cookie: kdb_session=a\r\n\r\n"
    ),
]
BODIES = [
    b"SELECT * FROM t WHERE id = 12345",
    b"INSERT INTO w VALUES (10000001, 0.5, 'row 1')",
    b"",
    b"x",
    b"SELECT 1",
    b"0123456789",
    FOLLOWING,  # a whole request as a body: a body, all the same
    b"\r\n\r\n",
    bytes(range(256)),
]


def request(head: bytes, body: bytes) -> bytes:
    return head % len(body) + body


def test_a_new_body_of_any_length_is_a_repeat_with_the_parsers_request():
    for head in HEADS:
        first = request(head, BODIES[0])
        for body in BODIES:
            again = request(head, body)
            assert as_parsed(first, again), again
            fast, taken, _ = after(request(head, body), first, repeats=True)  # from each
            assert taken


def test_a_body_that_does_not_fit_its_length_or_a_changed_head_is_parsed():
    head = HEADS[0]
    first = request(head, BODIES[0])
    body = BODIES[1]
    edits = [
        head % (len(body) + 1) + body,  # shorter than it says: the rest comes later
        head % (len(body) - 1) + body,  # longer: the next request's start
        request(head, body) + FOLLOWING,  # another after it
        request(head, body) + b"\r\n",
        head.replace(b": %d", b": 0%d") % len(body) + body,  # a leading zero
        head.replace(b": %d", b": +%d") % len(body) + body,
        head.replace(b"POST", b"PUT") % len(body) + body,
        head.replace(b"/exec", b"/exed") % len(body) + body,
        head.replace(b"kdb_a", b"kdb_b") % len(body) + body,
        head.replace(b"Content-Length: %d\r\n", b"Transfer-Encoding: chunked\r\n")
        + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body),
        head.replace(b"\r\n\r\n", b"\r\nContent-Length: %d\r\n\r\n") % (len(body), len(body))
        + body,  # twice
        b"\r\n" + request(head, body),
        request(head, body)[:-1],
        head % 99999999999999999 + body,
        head % 10**40 + body,
    ]
    for again in edits:
        assert not as_parsed(first, again), again


def test_no_repeat_is_taken_of_a_head_that_names_its_length_oddly_or_reads_on():
    body = BODIES[0]
    for first in (
        HEADS[0].replace(b": %d", b": 0%d") % len(body) + body,  # the digits not the number
        HEADS[0].replace(b": %d\r\n", b": %d\r\nContent-Length: %d\r\n") % (len(body), len(body))
        + body,  # refused by the parser anyway
        request(HEADS[0], body) + b"GET",  # another begun
        request(HEADS[0].replace(b"HTTP/1.1", b"HTTP/1.0"), body),  # not kept alive
    ):
        reader = wire.RequestReader(socket.socket(), 1 << 20)
        try:
            reader.take(first)
        finally:
            reader.sock.close()
        assert reader.repeated is None, first


def test_a_body_past_the_readers_limit_is_parsed_and_refused():
    reader = wire.RequestReader(socket.socket(), 64)
    try:
        reader.take(request(HEADS[0], b"SELECT 1"))
        assert isinstance(reader._repeat, BodyRepeat)
        reader.ready.clear()
        reader.take(request(HEADS[0], b"x" * 65))
        (refused, end) = reader.ready
    finally:
        reader.sock.close()
    assert type(refused).__name__ == "RequestBodyTooLarge" and end is None


_ODD_BYTES = b"\r\n \t:;0123456789aZ\x00\x7f\xff"
_LINES = st.sampled_from(
    [
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: 0\r\n",
        b"Expect: 100-continue\r\n",
        b"Connection: close\r\n",
        b"Upgrade: websocket\r\nConnection: upgrade\r\n",
        b" folded\r\n",
        b"\n",
        b"\r\n",
    ]
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A first request and the next: the same head with a new body (of the length its
    Content-Length says, or not), and now and then a byte edited, put in or taken out, a
    header line put in, or bytes after it, anywhere or near the length's digits."""
    head = draw(st.sampled_from(HEADS))
    first = request(head, draw(st.sampled_from(BODIES)))
    body = draw(st.sampled_from(BODIES))
    said = len(body) + draw(st.sampled_from([0, 0, 0, -1, 1, 10, -10]))
    data = bytearray(head % max(0, said) + body)
    digits = data.lower().index(b"length:") + 7
    for _ in range(draw(st.integers(0, 2))):
        size = len(data)
        at = draw(st.integers(0, size))
        if draw(st.booleans()):
            at = min(size, max(0, digits + draw(st.integers(-3, 4))))
        kind = draw(st.integers(0, 4))
        if kind == 0 and at < size:
            data[at] = draw(st.sampled_from(list(_ODD_BYTES)))
        elif kind == 1:
            data[at:at] = bytes([draw(st.sampled_from(list(_ODD_BYTES)))])
        elif kind == 2 and at < size:
            del data[at : at + draw(st.integers(1, 3))]
        elif kind == 3:
            lines = [i + 2 for i in range(size - 1) if data[i : i + 2] == b"\r\n"]
            place = draw(st.sampled_from(lines)) if lines else at
            data[place:place] = draw(_LINES)
        else:
            data += draw(st.sampled_from([b"abc", b"\r\n", FOLLOWING, first]))
    return first, bytes(data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_body_repeat_is_exactly_what_the_parser_makes_of_it_or_is_parsed(pair):
    first, again = pair
    as_parsed(first, again)


def test_a_body_repeats_environ_is_the_one_the_parsed_request_would_have():
    app = Recorder()
    sent = [request(HEADS[1], body) for body in BODIES[:4]]
    connection = served(app, sent)
    environs: list[dict[str, Any]] = app.environs
    for data, environ in zip(sent, environs, strict=True):
        # The app's note of the first request, for all.
        assert_parsed_environ(environ, data, connection, environs[0][MEMO_KEY])
        assert "refimpl.added" not in environ
    assert environs[1][MEMO_KEY] is environs[0][MEMO_KEY]  # the repeats: a repeat's marks
