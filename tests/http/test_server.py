"""The HTTP server: slow or stalled clients do not keep other requests waiting."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.http.conftest import Server, start_server


@pytest.fixture(scope="module")
def few_threads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("few") / "data", "--threads", "4")
    try:
        yield running
    finally:
        assert running.stop() == 0


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
            conn.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nSELECT")
        else:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Half: ")
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


def _answer(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(65536)
    return head.split(b"\r\n")[0] + b"\n" + body


def test_requests_that_arrive_in_pieces_are_answered_whole(few_threads: Server):
    sql = b"SELECT 40 + 2 AS answer"
    head = (f"POST /exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {few_threads.token}\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(sql)}\r\n\r\n").encode()
    with _connect(few_threads) as conn:
        for pieces in ([head[:7], head[7:], sql[:5], sql[5:]], [head + sql[:3], sql[3:]]):
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(0.05)
            answer = _answer(conn)
            assert answer.startswith(b"HTTP/1.1 200") and b"42" in answer
        conn.sendall(head + sql + head + sql)  # pipelined: two answers, in order
        assert b"42" in _answer(conn) and b"42" in _answer(conn)
