"""A long poll's re-poll (its head again but for the `id=` value) taken without the parser:
exactly the request the parser makes of the same bytes, or not taken at all."""

from __future__ import annotations

import socket
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.http.route_memo import MEMO_KEY
from refimpl.http.serving import wire
from tests.http.repeated_requests import (
    FOLLOWING,
    Recorder,
    after,
    as_parsed,
    assert_parsed_environ,
    served,
)

QUERY = quote("SELECT date_trunc('minute', time) AS m, last(price) AS close FROM trades")
# Real re-polls: the bench's client (Content-Length: 0), a browser-like one, the id last.
HEADS = [
    (
        f"GET /api/subscribe?query={QUERY}&id=3fa1b2c4d5e6f708.42&wait=30000 HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\nAuthorization: Bearer kdb_abcdefghijklmnopqrstuvwxyz\r\n"
        "Content-Length: 0\r\n\r\n"
    ).encode(),
    (
        f"GET /api/subscribe?db=demo&query={QUERY}&offsets=true&id=3 HTTP/1.1\r\n"
        "Host: localhost:9000\r\nAccept: text/event-stream\r\nCookie: kdb_session=abc\r\n"
        "X-Request-Id: poll-1\r\n\r\n"
    ).encode(),
]


def id_span(head: bytes) -> tuple[int, int]:
    """Where the digits that end the id's value are in `head`."""
    start = head.index(b"&id=") + 4
    end = start
    while head[end : end + 1].isalnum() or head[end : end + 1] == b".":
        end += 1
    start = end
    while head[start - 1 : start].isdigit():
        start -= 1
    return start, end


def test_a_new_id_of_any_length_is_a_repeat_with_the_parsers_request():
    for head in HEADS:
        start, end = id_span(head)
        for value in (b"43", b"1", b"123456789", b"0", b"00", b"9" * 20):
            again = head[:start] + value + head[end:]
            assert as_parsed(head, again), again


def test_what_is_not_an_id_or_not_alone_is_parsed():
    head = HEADS[0]
    start, end = id_span(head)
    for value in (b"", b"1.2", b".5", b"5.", b"a", b"1%32", b"1+2", b"\xd9\xa1", b"1" * 21):
        again = head[:start] + value + head[end:]
        assert not as_parsed(head, again), again
    for again in (head + FOLLOWING, head[:-2], head + b"\r\n", b"\r\n" + head):
        assert not after(head, again, repeats=True)[1]
    # A head with a body (empty or not): no repeat is taken of it.
    for framing in (
        b"Content-Length: 3\r\n\r\nabc",
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ):
        first = head.replace(b"Content-Length: 0\r\n\r\n", framing)
        again = head[:start] + b"43" + first[end:]
        assert not as_parsed(first, again)
    # A head with the start of another after it, or another whole: no repeat is taken of it
    # (empty lines between requests are nothing, and may be in one).
    for tail in (b"G", b"abc", b"GET /x HTTP/1.1\r\n", FOLLOWING, b"\r\n\r\n"):
        first = head + tail
        again = head[:start] + b"43" + head[end:] + tail
        assert as_parsed(first, again) == tail.startswith(b"\r\n")


def test_a_head_begun_in_an_earlier_receive_makes_no_repeat():
    """A head whose first bytes came in an earlier receive is not all of the receive that
    ended it: those last bytes (here from a header's value on, the start of a head of
    their own) must not be taken as its head, or a later head of those bytes alone would
    be served with the fields of the earlier ones (an Authorization it never sent)."""
    tail = b"GET /api/subscribe?query=x&id=1 HTTP/1.1\r\nHost: h\r\n\r\n"
    begun = b"GET /api/subscribe?query=x&id=1 HTTP/1.1\r\nAuthorization: Bearer kdb_a\r\nX: "
    again = tail.replace(b"id=1", b"id=2")
    for readers in ("take", "feed"):
        reader = wire.RequestReader(socket.socket(), 1 << 20)
        try:
            receive = getattr(reader, readers)
            receive(begun)
            receive(tail)
            (first,) = reader.ready
            assert isinstance(first, wire.ReceivedRequest)
            assert first.head.fields["HTTP_AUTHORIZATION"] == "Bearer kdb_a"
            reader.ready.clear()
            receive(again)
            (request,) = reader.ready
        finally:
            reader.sock.close()
        assert isinstance(request, wire.ReceivedRequest)
        assert request.head.target == "/api/subscribe?query=x&id=2"
        assert request.head.fields == {"HTTP_HOST": "h"}, readers


def test_every_one_byte_edit_of_a_repeat_is_what_the_parser_makes_of_it():
    """Each byte of a re-poll's head replaced by each byte that matters to framing, one
    byte put in before it, or it taken out; the id new or not."""
    head = HEADS[0]
    start, end = id_span(head)
    for again in (head, head[:start] + b"43" + head[end:]):
        for at in range(len(again) + 1):
            edits = [again[:at] + bytes([b]) + again[at:] for b in _ODD_BYTES]
            if at < len(again):
                edits += [again[:at] + bytes([b]) + again[at + 1 :] for b in _ODD_BYTES]
                edits.append(again[:at] + again[at + 1 :])
            for edited in edits:
                if as_parsed(head, edited):
                    assert edited.startswith(head[:start]) and edited.endswith(head[end:])


# Bytes that matter to framing and to the query.
_ODD_BYTES = b"\r\n \t:;%&=.?#/0123456789aZ\x00\x7f\x80\xff"
_ODD = st.sampled_from(list(_ODD_BYTES))
_LINES = st.sampled_from(
    [
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: 0\r\n",
        b"Host: other\r\n",
        b"Authorization: Bearer kdb_zzzzzzzzzzzzzzzzzzzzzzzzzzz\r\n",
        b"Expect: 100-continue\r\n",
        b"Connection: close\r\n",
        b"Upgrade: websocket\r\nConnection: upgrade\r\n",
        b"X_Forwarded: 1\r\n",
        b"Last-Event-ID: 5\r\n",
        b" folded\r\n",
        b"\n",
        b"\r\n",
    ]
)


def edit(draw: st.DrawFn, data: bytearray, original: bytes, kind: int | None = None) -> bytearray:
    """`data` after one edit (of `kind`, or one drawn), at a place drawn anywhere or near
    where a wrong repeat would hide: the id's value, the request line's ends, the head's
    end."""
    start, end = id_span(bytes(data)) if b"&id=" in data else (0, 0)
    size = len(data)
    near = draw(st.sampled_from([0, start, end, data.find(b" HTTP"), size - 4, size]))
    at = min(size, max(0, near + draw(st.integers(-3, 3))))
    if draw(st.booleans()):
        at = draw(st.integers(0, size))
    if kind is None:
        kind = draw(st.integers(0, 9))
    if kind == 0 and end:  # a new id, of any length, maybe not an id
        value = draw(st.text(alphabet="0123456789.", min_size=0, max_size=45))
        data[start:end] = value.encode()
    elif kind == 1 and at < size:
        data[at] = draw(_ODD)
    elif kind == 2:
        data[at:at] = bytes([draw(_ODD)])
    elif kind == 3 and at < size:
        del data[at : at + draw(st.integers(1, 4))]
    elif kind == 4:  # a header line, where the head's lines begin
        lines = [i + 2 for i in range(size - 1) if data[i : i + 2] == b"\r\n"]
        place = draw(st.sampled_from(lines)) if lines else at
        data[place:place] = draw(_LINES)
    elif kind == 5 and end:  # the id twice
        data[end:end] = b"&id=" + draw(st.sampled_from([b"1", b"3fa1b2c4d5e6f708.43", b""]))
    elif kind == 6 and end > start:  # a character of the id as a percent escape
        place = draw(st.integers(start, end - 1))
        data[place : place + 1] = b"%%%02X" % data[place]
    elif kind == 7:  # CR and LF games
        old = draw(st.sampled_from([b"\r\n", b"\r\n\r\n", b" HTTP/1.1"]))
        new = draw(st.sampled_from([b"\n", b"\r", b"\r\r\n", b"\n\r\n", b" HTTP/1.0", b""]))
        data = bytearray(bytes(data).replace(old, new, 1))
    elif kind == 8:  # bytes after the head (a body, the next request) or before it
        more = draw(st.sampled_from([b"abc", b"0\r\n\r\n", b"\r\n", FOLLOWING, original]))
        data = bytearray(data + more if draw(st.booleans()) else more + data)
    else:  # the method or the version
        old = draw(st.sampled_from([b"GET", b"HTTP/1.1"]))
        new = draw(st.sampled_from([b"HEAD", b"get", b"GET ", b"HTTP/1.0", b"HTTP/2.0"]))
        data = bytearray(bytes(data).replace(old, new, 1))
    return data


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A previous head (a real re-poll, now and then edited) and the next: that head after
    one to three edits (byte edits, headers inserted, the id changed, duplicated or escaped,
    line ends changed, bytes after or before it), among which a new id alone."""
    head = draw(st.sampled_from(HEADS))
    first = bytearray(head)
    if draw(st.integers(0, 3)) == 0:
        first = edit(draw, first, head)
    data = bytearray(first)
    new_id = draw(st.booleans())
    if new_id:
        data = edit(draw, data, bytes(first), kind=0)
    for _ in range(draw(st.integers(0 if new_id else 1, 2))):
        data = edit(draw, data, bytes(first))
    return bytes(first), bytes(data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_repeat_is_exactly_what_the_parser_makes_of_it_or_is_parsed(pair):
    first, again = pair
    taken = as_parsed(first, again)
    if taken:  # the only difference it may have: a new id value
        start, end = id_span(first)
        assert again.startswith(first[:start]) and again.endswith(first[end:])


def test_a_repeats_environ_is_the_one_the_parsed_request_would_have():
    app = Recorder()
    head = HEADS[1]
    start, end = id_span(head)
    values = (b"3", b"4", b"123456")
    # Then another head: parsed, and repeated in its turn.
    connection = served(app, [head[:start] + value + head[end:] for value in values] + HEADS[:1])
    environs = app.environs
    for value, environ in zip(values, environs, strict=False):
        data = head[:start] + value + head[end:]
        # The app's note of the first request, for all.
        assert_parsed_environ(environ, data, connection, environs[0][MEMO_KEY])
    assert environs[3]["QUERY_STRING"].endswith("id=3fa1b2c4d5e6f708.42&wait=30000")
    assert "HTTP_COOKIE" not in environs[3] and "refimpl.added" not in environs[3]
    assert environs[3][MEMO_KEY] is not environs[0][MEMO_KEY]
