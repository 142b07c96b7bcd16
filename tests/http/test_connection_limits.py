"""Connection limits: past them a client is told 503 with Retry-After, and others go on.

Loopback has a whole /8 of addresses, so connections from 127.0.0.2 and 127.0.0.3 are
other clients than those from 127.0.0.1 to the server's per-address limit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.http.conftest import Server, running_server

PER_ADDRESS = 4
TOTAL = 6


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("limited") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(
        f"max_connections = {TOTAL}\nmax_connections_per_address = {PER_ADDRESS}\n"
    )
    with running_server(data) as running:
        yield running


def connect(server: Server, source: str) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection(
        (parts.hostname, parts.port), timeout=10, source_address=(source, 0)
    )


def served(conn: socket.socket) -> bytes:
    """Send /health on `conn` (kept alive) and return the answer's status line."""
    conn.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
        part = conn.recv(65536)
        if not part:
            break
        answer += part
    return answer.split(b"\r\n", 1)[0]


def refusal(conn: socket.socket) -> tuple[bytes, dict]:
    """The answer a refused connection gets at once, before it sends anything."""
    answer = b""
    try:
        while part := conn.recv(65536):
            answer += part
    except ConnectionResetError:
        pass
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, json.loads(body)


def hold(server: Server, source: str, stack: ExitStack) -> socket.socket:
    """A connection from `source` that has been served once, kept open.

    Connections a test closed just before are counted out when the server sees them end,
    a moment later: until then a new one may still be refused, so refusals are retried.
    """
    deadline = time.monotonic() + 5
    while True:
        conn = connect(server, source)
        status = served(conn)
        if status == b"HTTP/1.1 200 OK":
            return stack.enter_context(conn)
        conn.close()
        assert status.startswith(b"HTTP/1.1 503 ") and time.monotonic() < deadline, status
        time.sleep(0.05)


def health_from(server: Server, source: str) -> None:
    started = time.monotonic()
    with connect(server, source) as conn:
        assert served(conn) == b"HTTP/1.1 200 OK"
    assert time.monotonic() - started < 2


def test_past_the_per_address_limit(limited: Server):
    with ExitStack() as stack:
        held = [hold(limited, "127.0.0.1", stack) for _ in range(PER_ADDRESS)]
        with connect(limited, "127.0.0.1") as extra:
            head, body = refusal(extra)
        assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: " in head
        assert "max_connections_per_address" in body["error"]
        health_from(limited, "127.0.0.2")  # another client is served meanwhile
        for conn in held:  # and those held go on
            assert served(conn) == b"HTTP/1.1 200 OK"
    # Closed connections are counted out.
    with ExitStack() as stack:
        hold(limited, "127.0.0.1", stack)


def test_past_the_total_limit(limited: Server):
    with ExitStack() as stack:
        held = [hold(limited, "127.0.0.1", stack) for _ in range(PER_ADDRESS)]
        held += [hold(limited, "127.0.0.2", stack) for _ in range(TOTAL - PER_ADDRESS)]
        with connect(limited, "127.0.0.3") as extra:
            head, body = refusal(extra)
        assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: " in head
        assert "max_connections" in body["error"]
        held.pop().close()
        hold(limited, "127.0.0.3", stack)  # a closed one makes room


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_file_descriptors(server: Server, db: str):
    # The process may open only a few more files than it has open: accepting past that
    # fails with EMFILE, which must be answered, without spinning, and not stop the server.
    pid = server.process.pid
    server.sql("CREATE TABLE t (id INT)", db)
    server.sql("INSERT INTO t VALUES (1)", db)
    soft_hard = subprocess.run(
        [
            "prlimit",
            "--pid",
            str(pid),
            "--nofile",
            "--raw",
            "--noheadings",
            "--output",
            "SOFT,HARD",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    opened = len(os.listdir(f"/proc/{pid}/fd"))
    subprocess.run(
        ["prlimit", "--pid", str(pid), f"--nofile={opened + 8}:{soft_hard[1]}"], check=True
    )
    try:
        with ExitStack() as stack:
            conns = []
            for _ in range(12):
                conn = stack.enter_context(connect(server, "127.0.0.1"))
                conn.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                conns.append(conn)
            statuses = []
            for conn in conns:
                answer = b""
                try:
                    while b"}" not in answer and (part := conn.recv(65536)):
                        answer += part
                except ConnectionResetError:
                    pass
                statuses.append(answer.split(b"\r\n", 1)[0])
            assert b"HTTP/1.1 503 Service Unavailable" in statuses, statuses
            assert set(statuses) <= {b"HTTP/1.1 200 OK", b"HTTP/1.1 503 Service Unavailable"}
            # Out of descriptors, the server does not spin on the listening socket.
            before = _cpu_seconds(pid)
            time.sleep(1.0)
            assert _cpu_seconds(pid) - before < 0.5
    finally:
        subprocess.run(
            ["prlimit", "--pid", str(pid), f"--nofile={soft_hard[0]}:{soft_hard[1]}"], check=True
        )
    assert requests.get(server.url + "/health", timeout=2).status_code == 200
    assert server.rows("SELECT id FROM t", db) == [[1]]
