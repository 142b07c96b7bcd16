"""A dropped database is let go while a connection whose `/exec` session was kept in it
stays open and idle (`sql_routes._session` keeps the session for the connection's repeats;
the server's idle look forgets it): its tables' memory is not held until that connection's
next request or its keep-alive limit."""

from __future__ import annotations

import gc
import socket
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.http.app import App, AppOptions
from refimpl.http.serving.server import IDLE_CHECK_SECONDS
from tests.http.conftest import pooled_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Instance, str, int]]:
    instance = Instance.open(tmp_path / "data")
    try:
        token = instance.access.ensure_admin()
        assert token is not None
        instance.create_database("gone")
        with pooled_server(App(instance, AppOptions())) as server:
            yield instance, token, server.server_address[1]
    finally:
        instance.close()


def _ask(sock: socket.socket, token: str, sql: str) -> bytes:
    body = sql.encode()
    sock.sendall(
        b"POST /exec?db=gone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
        % (token.encode(), len(body), body)
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, rest = answer.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head.split(b"\r\n")[0]


def test_a_dropped_database_is_not_held_by_an_idle_connection(
    served: tuple[Instance, str, int],
) -> None:
    instance, token, port = served
    gone = weakref.ref(instance.database("gone"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # The same head each time: the second and third are repeats, run in the kept session.
        for sql in ("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"):
            assert _ask(sock, token, sql).endswith(b"200 OK")
        assert _ask(sock, token, "SELECT count(*) FROM t").endswith(b"200 OK")
        instance.drop_database("gone")
        deadline = time.monotonic() + 3 * IDLE_CHECK_SECONDS + 2
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
            gc.collect()
        assert gone() is None, "the dropped database is still held while its connection idles"
