"""HTTP/1.1 requests, bodies and environs, read from a real socket pair."""

from __future__ import annotations

import io
import socket

import pytest

from refimpl.errors import MalformedRequest
from refimpl.http.encode import Answer
from refimpl.http.error_answers import status_of
from refimpl.http.serving import wire
from refimpl.http.serving.environ import connection_environ, make_environ


def read_all(*chunks: bytes, max_body: int = 1 << 20) -> list:
    """What a reader makes of `chunks` arriving one by one: requests, then an error or None."""
    ours, theirs = socket.socketpair()
    reader = wire.RequestReader(ours, max_body)
    out: list = []
    try:
        for chunk in [*chunks, b""]:
            if chunk:
                theirs.sendall(chunk)
            else:
                theirs.shutdown(socket.SHUT_WR)
            while reader.receive():
                item = reader.next()
                out.append(item)
                if not isinstance(item, wire.ReceivedRequest):
                    return out
    finally:
        ours.close()
        theirs.close()
    return out


def one_error(*chunks: bytes, max_body: int = 1 << 20) -> MalformedRequest:
    out = read_all(*chunks, max_body=max_body)
    errors = [item for item in out if isinstance(item, MalformedRequest)]
    assert len(errors) == 1, out
    return errors[0]


def test_head_and_body_from_one_buffer():
    first, second = read_all(
        b"\r\nPOST /exec?db=x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
        b"GET /health HTTP/1.1\r\n\r\n"
    )[:2]
    head = first.head
    assert (head.method, head.target, head.version, head.keep_alive) == (
        "POST",
        "/exec?db=x",
        "HTTP/1.1",
        True,
    )
    environ = make_environ(first, connection_environ(("127.0.0.1", 9000), ("127.0.0.1", 5)))
    assert environ["wsgi.input"].read() == b"abc" == first.data  # held in memory: its bytes
    assert (environ["PATH_INFO"], environ["QUERY_STRING"]) == ("/exec", "db=x")
    assert environ["CONTENT_LENGTH"] == "3" and environ["HTTP_HOST"] == "h"
    assert second.head.target == "/health" and second.body_length == 0


def test_a_head_arriving_byte_by_byte():
    data = b"GET /a HTTP/1.0\r\nX: 1\r\n\r\n"
    (request, end) = read_all(*[data[i : i + 1] for i in range(len(data))])
    assert request.head.target == "/a" and request.head.header("x") == "1"
    assert not request.head.keep_alive and end is None


@pytest.mark.parametrize(
    ("data", "status", "word"),
    [
        (b"NONSENSE\r\n\r\n", 400, "HTTP/1.1"),
        (b"GET / HTTP/2.0\r\n\r\n", 400, "HTTP/2.0"),
        (b"GET /\r\n\r\n", 400, "HTTP/0.9"),
        (b"GET / FTP/1.1\r\n\r\n", 400, "HTTP"),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "header"),
        (b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400, "header value"),
        (b"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400, "header value"),
        (b"GET / HTTP/1.1\r\nX: y\nY: z\n\n", 400, "HTTP/1.1"),  # bare newlines
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431, "100"),
        (b"GET / HTTP/1.1\r\nHost", 400, "ended"),
    ],
)
def test_malformed_heads(data: bytes, status: int, word: str):
    error = one_error(data)
    assert status_of(error) == status and word in error.message, error.message


@pytest.mark.parametrize("kinds", ["distinct", "repeated", "mixed"])
def test_a_head_takes_100_fields_of_any_kind_and_refuses_the_101st(kinds: str) -> None:
    # Names sent before take the reader's short path, the others its long one: the count
    # holds across both (a field either adds an environ key or takes room).
    def field(n: int) -> bytes:
        if kinds == "distinct" or (kinds == "mixed" and n % 3 == 0):
            return b"X-F%d: v\r\n" % n
        if kinds == "mixed" and n % 3 == 1:
            return b"Under_Score: v\r\n"  # left out of the environ: counted all the same
        return b"X-Same: v\r\n"

    for count, refused in ((100, False), (101, True)):
        head = b"GET / HTTP/1.1\r\n" + b"".join(field(n) for n in range(count))
        for _ in range(2):  # the second time, every name was sent before
            out = read_all(head + b"\r\n")
            if refused:
                assert isinstance(out[0], MalformedRequest) and status_of(out[0]) == 431
            else:
                assert isinstance(out[0], wire.ReceivedRequest), out[0]


@pytest.mark.parametrize("pieces", [1, 70_000])
def test_request_line_and_head_limits_however_they_arrive(pieces: int):
    def cut(data: bytes) -> list[bytes]:
        size = max(1, len(data) // pieces)
        return [data[i : i + size] for i in range(0, len(data), size)]

    assert status_of(one_error(*cut(b"GET /" + b"a" * 70_000))) == 414
    header = b"GET / HTTP/1.1\r\nX: " + b"a" * 300_000
    pieces_of_head = [header[i : i + 60_000] for i in range(0, len(header), 60_000)]
    assert status_of(one_error(*pieces_of_head)) == 431


def test_chunked_bodies_with_extensions_and_percent_decoded_path():
    (request, _) = read_all(
        b"POST /a%20b?q=%41 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;name=value\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n"
    )
    environ = make_environ(request, connection_environ(("h", 1), ("c", 2)))
    assert environ["wsgi.input"].read() == b"abcde" and environ["CONTENT_LENGTH"] == "5"
    assert "HTTP_TRANSFER_ENCODING" not in environ  # the body is de-chunked already
    assert (environ["PATH_INFO"], environ["QUERY_STRING"]) == ("/a b", "q=%41")


def test_header_names_in_the_environ_whatever_their_case_and_repeats():
    # Twice: the second request's names come from what the first one's mapping kept.
    head = (
        b"POST / HTTP/1.1\r\nHost: h\r\nX-Thing: a\r\nx-thing: b\r\nX_Thing: forged\r\n"
        b"content-type: text/plain\r\nContent-Type: application/json\r\n"
        b"CONTENT-LENGTH: 2\r\nEXPECT: 100-continue\r\n\r\nok"
    )
    for request in read_all(head, head)[:2]:
        environ = make_environ(request, connection_environ(("h", 1), ("c", 2)))
        assert environ["HTTP_X_THING"] == "a,b"  # joined; the '_' spelling is dropped
        assert environ["CONTENT_TYPE"] == "application/json"  # the last one, alone
        assert environ["CONTENT_LENGTH"] == "2" and environ["wsgi.input"].read() == b"ok"
        assert environ["HTTP_EXPECT"] == "100-continue" and "HTTP_CONTENT_LENGTH" not in environ


@pytest.mark.parametrize(
    ("data", "word"),
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", "chunk size"),
        (b"-3\r\nabc\r\n0\r\n\r\n", "chunk size"),
        (b"3\r\nabcdef\r\n0\r\n\r\n", "chunk"),
        (b"ffffffffffffffffffff\r\n", "chunk"),
    ],
)
def test_bad_chunked_bodies(data: bytes, word: str):
    error = one_error(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + data)
    assert status_of(error) == 400 and word in error.message.lower(), error.message


def test_a_truncated_chunked_body():
    error = one_error(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc")
    assert status_of(error) == 400 and "ended" in error.message


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: 3\r\nContent-Length: 4\r\n",
        b"Content-Length: 3\r\nContent-Length: 3\r\n",
        b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: gzip\r\n",
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: -5\r\n",
        b"Content-Length: 1e3\r\n",
    ],
)
def test_ambiguous_framing_is_refused_and_ends_the_connection(head: bytes):
    # Behind a proxy that reads the framing differently, any of these smuggles a request.
    out = read_all(b"POST / HTTP/1.1\r\n" + head + b"\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n")
    assert [type(item) for item in out] == [MalformedRequest], out  # the GET is not read
    assert isinstance(out[0], MalformedRequest) and status_of(out[0]) == 400


def test_bodies_past_the_limit_are_refused_before_they_are_read():
    declared = b"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n"
    assert status_of(one_error(declared, max_body=1000)) == 413
    chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1f4\r\n" + b"x" * 500
    assert status_of(one_error(chunked + b"\r\n" + b"1f4\r\n" + b"x" * 450, max_body=900)) == 413


def test_large_bodies_go_to_a_file():
    size = wire.MEMORY_BODY_BYTES * 3
    head = f"POST / HTTP/1.1\r\nContent-Length: {size}\r\n\r\n".encode()
    body = bytes(range(256)) * (size // 256)
    (request, _) = read_all(head, *[body[i : i + 50_000] for i in range(0, size, 50_000)])
    assert not isinstance(request.body, io.BytesIO) and request.data is None
    assert request.body.read() == body and request.body_length == size
    request.close()


def test_answer_heads_and_errors():
    head = wire.answer_head(
        "200 OK", [("Content-Length", "2"), ("Date", "x")], chunked=False, keep_alive=True
    )
    assert head.startswith(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: ")
    assert head.count(b"Date:") == 1 and b"Date: x" not in head
    assert head.endswith(b"Connection: keep-alive\r\n\r\n")
    error = wire.error_answer(431, 'too "many"')
    assert error.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert error.endswith(b'\r\n\r\n{"error": "too \'many\'"}')
    assert error.count(b"Date:") == 1


def test_an_answer_head_drops_the_applications_date_in_any_case_and_keeps_the_rest():
    head = wire.answer_head(
        "200 OK",
        [("date", "x"), ("DATE", "y"), ("Dated", "z"), ("X-Date", "w")],
        chunked=True,
        keep_alive=False,
    )
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 200 OK"
    assert lines[1:3] == [b"Dated: z", b"X-Date: w"]
    assert [line for line in lines if line.lower().startswith(b"date:")] == [lines[3]]
    assert lines[3] not in (b"date: x", b"DATE: y")
    assert lines[4:] == [b"Transfer-Encoding: chunked", b"Connection: close", b"", b""]
    assert wire.has_length([("content-LENGTH", "1")])
    assert not wire.has_length([("Content-Lengths", "1"), ("X-Content-Length", "1")])


def test_a_shared_answer_is_encoded_once_per_kind():
    answer = Answer(b'{"a": 1}')
    first = wire.whole_answer(answer, keep_alive=True, with_body=True)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b'\r\n\r\n{"a": 1}')
    assert b"Connection: keep-alive" in first and b"Content-Length: 8" in first
    assert wire.whole_answer(answer, keep_alive=True, with_body=True) is first
    closing = wire.whole_answer(answer, keep_alive=False, with_body=False)
    assert b"Connection: close" in closing and closing.endswith(b"\r\n\r\n")


@pytest.mark.parametrize("keep_alive", [True, False])
@pytest.mark.parametrize("with_body", [True, False])
def test_an_answer_for_one_request_has_the_shared_answers_bytes(
    keep_alive: bool, with_body: bool
) -> None:
    answer = Answer(b'{"a": 1}', 400, headers={"Server-Timing": "app;dur=0.1"})
    shared = Answer(b'{"a": 1}', 400, headers={"Server-Timing": "app;dur=0.1"})
    made = wire.answer_bytes(answer, keep_alive, with_body)
    assert made == wire.whole_answer(shared, keep_alive, with_body)
    with_id = wire.answer_bytes(answer, keep_alive, with_body, ("X-Request-Id", "r-1"))
    assert with_id == wire.with_header(made, "X-Request-Id", "r-1")
    assert b"\r\nX-Request-Id: r-1\r\n\r\n" in with_id
    assert answer.wire is None  # made for one request: nothing kept on the answer
