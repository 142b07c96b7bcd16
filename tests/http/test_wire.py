"""HTTP/1.1 request heads, bodies and environs, read from a real socket pair."""

from __future__ import annotations

import socket

import pytest

from refimpl.http.encode import Answer
from refimpl.http.serving import wire


def reader_of(*chunks: bytes) -> wire.SocketReader:
    ours, theirs = socket.socketpair()
    for chunk in chunks:
        theirs.sendall(chunk)
    theirs.close()
    ours.settimeout(5)
    return wire.SocketReader(ours)


def test_head_and_body_from_one_buffer():
    reader = reader_of(
        b"\r\nPOST /exec?db=x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET"
    )
    head = wire.parse_head(reader.read_head())
    assert (head.method, head.target, head.version, head.keep_alive) == (
        "POST", "/exec?db=x", "HTTP/1.1", True,
    )
    environ = wire.make_environ(head, reader, ("127.0.0.1", 9000), ("127.0.0.1", 5))
    assert environ["wsgi.input"].read() == b"abc"
    assert (environ["PATH_INFO"], environ["QUERY_STRING"]) == ("/exec", "db=x")
    assert environ["CONTENT_LENGTH"] == "3" and environ["HTTP_HOST"] == "h"
    assert reader.buffered == 3  # the next request's first bytes stay for it


def test_heads_split_across_receives_and_bare_newlines():
    reader = reader_of(b"GET /a HT", b"TP/1.0\nX: 1\n", b"\n")
    head = wire.parse_head(reader.read_head())
    assert head.target == "/a" and head.header("x") == "1" and not head.keep_alive
    assert reader.read_head() is None  # a clean end of stream


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"NONSENSE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / FTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
    ],
)
def test_malformed_heads(data, status):
    reader = reader_of(data)
    with pytest.raises(wire.MalformedRequest) as caught:
        wire.parse_head(reader.read_head())
    assert caught.value.status == status


def test_oversized_request_line_and_cut_head():
    with pytest.raises(wire.MalformedRequest) as caught:
        reader_of(b"GET /" + b"a" * 70000).read_head()
    assert caught.value.status == 414
    with pytest.raises(wire.MalformedRequest) as caught:
        reader_of(b"GET / HTTP/1.1\r\nHost").read_head()
    assert caught.value.status == 400


def test_chunked_body_and_percent_decoded_path():
    reader = reader_of(
        b"POST /a%20b?q=%41 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    head = wire.parse_head(reader.read_head())
    environ = wire.make_environ(head, reader, ("h", 1), ("c", 2))
    assert environ["wsgi.input_terminated"] is True
    assert environ["wsgi.input"].read() == b"abc"
    assert (environ["PATH_INFO"], environ["QUERY_STRING"]) == ("/a b", "q=%41")


def test_bad_content_length():
    reader = reader_of(b"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n")
    head = wire.parse_head(reader.read_head())
    with pytest.raises(wire.MalformedRequest):
        wire.make_environ(head, reader, ("h", 1), ("c", 2))


def test_answer_heads_and_errors():
    head = wire.answer_head("200 OK", [("Content-Length", "2")], chunked=False, keep_alive=True)
    assert head.startswith(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: ")
    assert head.endswith(b"Connection: keep-alive\r\n\r\n")
    error = wire.error_answer(431, 'too "many"')
    assert error.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert error.endswith(b"\r\n\r\n{\"error\": \"too 'many'\"}")


def test_a_shared_answer_is_encoded_once_per_kind():
    answer = Answer(b'{"a": 1}')
    first = wire.whole_answer(answer, keep_alive=True, with_body=True)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b'\r\n\r\n{"a": 1}')
    assert b"Connection: keep-alive" in first and b"Content-Length: 8" in first
    assert wire.whole_answer(answer, keep_alive=True, with_body=True) is first
    closing = wire.whole_answer(answer, keep_alive=False, with_body=False)
    assert b"Connection: close" in closing and closing.endswith(b"\r\n\r\n")
