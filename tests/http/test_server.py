"""The HTTP server: slow or stalled clients do not keep other requests waiting."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from refimpl.http.encode import Answer
from refimpl.http.serving import server as serving
from tests.http.conftest import Server, pooled_server, running_server


@pytest.fixture(scope="module")
def few_threads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("few") / "data", "--threads", "4") as running:
        yield running


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _connect(server: Server) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def test_stalled_bodies_and_heads_do_not_stop_the_server(few_threads: Server, tmp_path: Path):
    stalled = []
    for n in range(4):
        conn = _connect(few_threads)
        if n % 2:
            conn.sendall(
                b"POST /exec HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nSELECT"
            )
        else:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Half: ")
        stalled.append(conn)
    time.sleep(0.3)  # every stalled request has been looked at by a worker
    started = time.monotonic()
    response = few_threads.get("/health", timeout=10)
    assert response.status_code == 200
    assert time.monotonic() - started < 5
    # Waiting for the rest of a request costs no processor time (no busy polling).
    before = _cpu_seconds(few_threads.process.pid)
    time.sleep(1.0)
    assert _cpu_seconds(few_threads.process.pid) - before < 0.5
    for conn in stalled:
        conn.close()


def _answer(conn: socket.socket, buffered: bytearray | None = None) -> bytes:
    """One answer's status line and body; bytes past it (a pipelined answer) stay in
    `buffered` for the next call."""
    data = bytearray() if buffered is None else buffered
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    end = data.index(b"\r\n\r\n")
    head = bytes(data[:end])
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
    )
    while len(data) < end + 4 + length:
        data += conn.recv(65536)
    body = bytes(data[end + 4 : end + 4 + length])
    del data[: end + 4 + length]
    return head.split(b"\r\n")[0] + b"\n" + body


def test_requests_that_arrive_in_pieces_are_answered_whole(few_threads: Server):
    sql = b"SELECT 40 + 2 AS answer"
    head = (
        f"POST /exec HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {few_threads.token}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(sql)}\r\n\r\n"
    ).encode()
    with _connect(few_threads) as conn:
        for pieces in ([head[:7], head[7:], sql[:5], sql[5:]], [head + sql[:3], sql[3:]]):
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(0.05)
            answer = _answer(conn)
            assert answer.startswith(b"HTTP/1.1 200") and b"42" in answer
        conn.sendall(head + sql + head + sql)  # pipelined: two answers, in order
        buffered = bytearray()
        assert b"42" in _answer(conn, buffered) and b"42" in _answer(conn, buffered)


def _health_answers(server: Server) -> None:
    started = time.monotonic()
    assert server.get("/health", timeout=2).status_code == 200
    assert time.monotonic() - started < 2


def test_slow_bodies_hold_no_worker(few_threads: Server, tmp_path: Path):
    # Four times as many trickling bodies as the server has workers, of each kind: chunked,
    # a large Content-Length, and one that waits for `100 Continue`.
    token = few_threads.token
    head = f"POST /exec HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
    heads = [
        head + "Transfer-Encoding: chunked\r\n\r\n",
        head + "Content-Length: 10000000\r\n\r\n",
        head + "Content-Length: 8\r\nExpect: 100-continue\r\n\r\n",
    ]
    slow = []
    for n in range(16):
        conn = _connect(few_threads)
        conn.sendall(heads[n % 3].encode())
        slow.append((n % 3, conn))
    for _ in range(5):  # the trickle goes on while others are answered
        for kind, conn in slow:
            if kind == 0:
                conn.sendall(b"1\r\n \r\n")
            elif kind == 1:
                conn.sendall(b" ")
        _health_answers(few_threads)
        time.sleep(0.2)
    for kind, conn in slow:
        if kind == 2:
            assert conn.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            conn.sendall(b"SELECT 7")
            assert b"[[7]]" in _answer(conn)
        if kind == 0:
            conn.sendall(b"8\r\nSELECT 8\r\n0\r\n\r\n")
            assert b"[[8]]" in _answer(conn)
        conn.close()
    # Nothing of the unfinished requests ran.
    assert few_threads.rows("SELECT 1 AS one") == [[1]]


def test_a_request_has_a_deadline_from_its_first_byte(monkeypatch: pytest.MonkeyPatch):
    # Each byte comes well within the deadline; the request as a whole does not.
    monkeypatch.setattr(serving, "CONNECTION_TIMEOUT_SECONDS", 1.0)

    def app(environ: dict, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    with pooled_server(app) as pooled:
        with socket.create_connection(("127.0.0.1", pooled.server_port), timeout=10) as conn:
            conn.sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n")
            answer = b""
            for _ in range(50):
                try:
                    conn.sendall(b"x")
                except OSError:
                    break  # closed after its answer
                time.sleep(0.1)
            try:
                while part := conn.recv(65536):
                    answer += part
            except ConnectionResetError:
                pass  # after the answer: the bytes sent past it were not read
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"first byte" in answer


def test_any_wsgi_application_is_served_through_the_wsgi_calls() -> None:
    # Without refimpl's `App.answer`, the server calls the application as WSGI: an encoded
    # Answer it returns, any other body (chunked without a Content-Length), and HEAD.
    def app(environ: dict, start_response):
        if environ["PATH_INFO"] == "/answer":
            return Answer(b'{"a": 1}')(environ, start_response)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"one ", b"", b"two"]

    with pooled_server(app) as pooled:
        with socket.create_connection(("127.0.0.1", pooled.server_port), timeout=10) as conn:
            conn.sendall(b"GET /answer HTTP/1.1\r\nHost: h\r\n\r\n")
            assert _answer(conn) == b'HTTP/1.1 200 OK\n{"a": 1}'
            conn.sendall(b"GET /parts HTTP/1.1\r\nHost: h\r\n\r\nHEAD /answer HTTP/1.1\r\n\r\n")
            data = b""
            while not data.endswith(b"Connection: keep-alive\r\n\r\n") or data.count(b"HTTP/") < 2:
                data += conn.recv(65536)
        first, _, second = data.partition(b"0\r\n\r\n")
        assert b"Transfer-Encoding: chunked" in first and first.endswith(
            b"4\r\none \r\n3\r\ntwo\r\n"
        )
        assert second.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 8\r\n" in second
