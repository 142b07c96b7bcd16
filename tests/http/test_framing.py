"""Request framing on a real server, with raw sockets: every bad frame gets one clear 4xx.

A proxy in front of the server and the server must agree where each request ends; framing
that two readers could read differently (two lengths, a length beside chunked, an unknown
transfer coding) is refused and the connection closed, so nothing can be smuggled after it.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.http.conftest import Server


def connect(server: Server) -> socket.socket:
    parts = urlsplit(server.url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def answers_until_closed(conn: socket.socket) -> list[tuple[int, dict[str, str], bytes]]:
    """Every answer the server sends on `conn` until it closes: status, headers, body."""
    data = b""
    while True:
        try:
            part = conn.recv(65536)
        except ConnectionResetError:
            break
        if not part:
            break
        data += part
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}\n{value.strip()}" if key in headers else value.strip()
        length = int(headers.get("content-length", "0"))
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]
    return out


def send(server: Server, data: bytes, *, close_write: bool = False) -> list:
    with connect(server) as conn:
        conn.sendall(data)
        if close_write:
            conn.shutdown(socket.SHUT_WR)
        return answers_until_closed(conn)


def assert_refused(answers: list, status: int, *words: str) -> None:
    """Exactly one answer, a JSON error with `status`, and then the connection closed."""
    assert [a[0] for a in answers] == [status], answers
    code, headers, body = answers[0]
    assert headers["content-type"] == "application/json"
    message = json.loads(body)["error"]
    for word in words:
        assert word in message, message


def health_answers(server: Server) -> None:
    started = time.monotonic()
    assert server.get("/health", timeout=2).status_code == 200
    assert time.monotonic() - started < 2


def exec_head(server: Server, db: str, extra: str) -> bytes:
    return (
        f"POST /exec?db={db} HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {server.token}\r\n{extra}\r\n"
    ).encode()


@pytest.fixture
def table(server: Server, db: str) -> str:
    server.sql("CREATE TABLE t (id INT)", db)
    server.sql("INSERT INTO t VALUES (1)", db)
    return "t"


def unchanged(server: Server, db: str) -> None:
    assert server.rows("SELECT id FROM t", db) == [[1]]


INSERT = b"INSERT INTO t VALUES (2)"


@pytest.mark.parametrize(
    ("chunks", "word"),
    [
        (b"zz\r\n" + INSERT + b"\r\n0\r\n\r\n", "chunk size"),
        (b"-18\r\n" + INSERT + b"\r\n0\r\n\r\n", "chunk size"),
        (b"4\r\n" + INSERT + b"\r\n0\r\n\r\n", "chunk"),
        (b"18\r\n" + INSERT + b"XX0\r\n\r\n", "chunk"),
    ],
)
def test_bad_chunked_bodies_are_400(server: Server, db: str, table: str, chunks: bytes, word: str):
    head = exec_head(server, db, "Transfer-Encoding: chunked\r\n")
    answers = send(server, head + chunks)
    assert_refused(answers, 400)
    assert word in json.loads(answers[0][2])["error"].lower()
    health_answers(server)
    unchanged(server, db)


def test_a_truncated_chunked_body_is_400(server: Server, db: str, table: str):
    head = exec_head(server, db, "Transfer-Encoding: chunked\r\n")
    assert_refused(send(server, head + b"40\r\n" + INSERT, close_write=True), 400, "ended")
    unchanged(server, db)


def test_chunk_extensions_are_taken(server: Server, db: str, table: str):
    head = exec_head(server, db, "Transfer-Encoding: chunked\r\nConnection: close\r\n")
    body = b"8;ext=1\r\n" + INSERT[:8] + b"\r\n10;a=b;c\r\n" + INSERT[8:] + b"\r\n0\r\n\r\n"
    answers = send(server, head + body)
    assert [a[0] for a in answers] == [200], answers
    assert server.rows("SELECT id FROM t ORDER BY id", db) == [[1], [2]]


@pytest.mark.parametrize(
    "framing",
    [
        f"Content-Length: {len(INSERT)}\r\nContent-Length: 5\r\n",
        f"Content-Length: {len(INSERT)}\r\nContent-Length: {len(INSERT)}\r\n",
        f"Content-Length: {len(INSERT)}\r\nTransfer-Encoding: chunked\r\n",
        f"Transfer-Encoding: chunked\r\nContent-Length: {len(INSERT)}\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: identity\r\n",
    ],
)
def test_ambiguous_framing_gets_one_answer_and_the_connection_closes(
    server: Server, db: str, table: str, framing: str
):
    # A proxy reading the other length would see a second request: it must never run.
    smuggled = exec_head(server, db, f"Content-Length: {len(INSERT)}\r\n") + INSERT
    answers = send(server, exec_head(server, db, framing) + INSERT + smuggled)
    assert_refused(answers, 400)
    health_answers(server)
    unchanged(server, db)


@pytest.mark.parametrize(
    ("data", "status", "word"),
    [
        (b"GET /health\r\n\r\n", 400, "HTTP/0.9"),
        (b"GET /health HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 400, "header"),
        (b"GET /health HTTP/1.1\r\nX-A: a\x07b\r\n\r\n", 400, "header"),
        (b"GET /health HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", 400, ""),  # obsolete line folding
    ],
)
def test_old_versions_and_control_bytes_are_refused(
    server: Server, data: bytes, status: int, word: str
):
    assert_refused(send(server, data), status, word)
    health_answers(server)


@pytest.mark.parametrize("piece", [1, 70_000])
def test_the_request_line_limit_holds_however_it_arrives(server: Server, piece: int):
    line = b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n"
    with connect(server) as conn:
        try:
            for at in range(0, 66_000, piece):
                conn.send(line[at : at + piece])
        except OSError:
            pass  # the server answered and closed: the rest is not read
        answers = answers_until_closed(conn)
    assert_refused(answers, 414)
    health_answers(server)


def test_one_date_header_per_answer(server: Server):
    for data in (b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", b"NONSENSE\r\n\r\n"):
        (answer,) = send(server, data)
        assert "\n" not in answer[1]["date"], answer[1]
