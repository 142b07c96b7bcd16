"""An event a worker's wait took but the worker does not serve (its place went on):
`PooledWSGIServer._left` arms the connection's registration again, so that epoll reports it
to a worker with a place. None is lost; a connection a worker holds is never armed for a
second one meanwhile.

Deterministic: the server has no worker threads, and the test is the worker. It takes the
events from the server's epoll set itself and serves them (`_event`) or leaves them
(`_left`), with real sockets on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from refimpl.http.serving.server import PooledWSGIServer

WAIT = 10.0


class HoldingApp:
    """Answers every request with its path; `/hold` waits until `release` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, environ: dict, start_response: Callable) -> list[bytes]:
        path = environ["PATH_INFO"]
        if path == "/hold":
            self.entered.set()
            assert self.release.wait(WAIT)
        body = path.encode()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]


@pytest.fixture
def app() -> HoldingApp:
    return HoldingApp()


@pytest.fixture
def server(app: HoldingApp) -> Iterator[PooledWSGIServer]:
    pooled = PooledWSGIServer("127.0.0.1", 0, app, threads=0)
    try:
        yield pooled
    finally:
        app.release.set()
        pooled.drain()
        pooled.server_close()


def _connect(server: PooledWSGIServer) -> tuple[socket.socket, int]:
    """A client connection and the server's descriptor of it, registered in the set."""
    client = socket.create_connection(("127.0.0.1", server.server_port), timeout=WAIT)
    server.handle_request()  # accepted and registered, as the serving thread does
    own = client.getsockname()
    fds = [fd for fd, c in server._connections.items() if c.client_address == own]
    assert len(fds) == 1
    return client, fds[0]


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()


def _take(server: PooledWSGIServer, count: int) -> dict[int, int]:
    """What workers' waits take: `count` events, by descriptor (each one-shot registration
    fires once, so none comes twice)."""
    taken: dict[int, int] = {}
    while len(taken) < count:
        events = server._epoll.poll(WAIT, 4)
        assert events, f"only {len(taken)} of {count} events came"
        for fd, mask in events:
            assert fd not in taken
            taken[fd] = mask
    return taken


def _answer(client: socket.socket, body: bytes) -> None:
    data = b""
    while not data.endswith(body):
        more = client.recv(65536)
        assert more, data
        data += more
    assert data.startswith(b"HTTP/1.1 200 "), data


def test_an_event_taken_and_left_is_reported_again_once_and_served(
    server: PooledWSGIServer,
) -> None:
    a, fd_a = _connect(server)
    b, fd_b = _connect(server)
    with a, b:
        a.sendall(_get("/a"))
        b.sendall(_get("/b"))
        taken = _take(server, 2)  # one wait took both
        server._event(fd_a, taken[fd_a])  # served in turn
        _answer(a, b"/a")
        server._left(fd_b, taken[fd_b])  # the worker's place went on: not served here
        # Reported again, to whichever worker waits next, and once.
        again = server._epoll.poll(WAIT, 4)
        assert [fd for fd, _ in again] == [fd_b]
        assert server._epoll.poll(0.05, 4) == []
        server._event(*again[0])
        _answer(b, b"/b")


def test_a_connection_served_meanwhile_is_not_armed_for_another_worker(
    server: PooledWSGIServer, app: HoldingApp
) -> None:
    c, fd_c = _connect(server)
    with c:
        c.sendall(_get("/hold"))
        mask = _take(server, 1)[fd_c]
        worker = threading.Thread(target=server._event, args=(fd_c, mask))
        worker.start()
        try:
            assert app.entered.wait(WAIT)
            # Its next request comes while a worker serves it, and a copy of its event,
            # taken by another worker's wait, is left: the connection stays the first
            # worker's alone.
            c.sendall(_get("/next"))
            server._left(fd_c, mask)
            assert server._epoll.poll(0.1, 4) == []
        finally:
            app.release.set()
            worker.join(WAIT)
        _answer(c, b"/hold")
        # Its worker armed it once done: the next request is reported, once.
        again = server._epoll.poll(WAIT, 4)
        assert [fd for fd, _ in again] == [fd_c]
        server._event(*again[0])
        _answer(c, b"/next")
        assert server._epoll.poll(0.05, 4) == []


def test_a_closed_connections_left_event_is_dropped(server: PooledWSGIServer) -> None:
    d, fd_d = _connect(server)
    with d:
        d.sendall(_get("/d"))
        mask = _take(server, 1)[fd_d]
        handler = server._connections[fd_d]
        server._release(handler, False)  # closed meanwhile (an idle sweep, a stop)
        server._left(fd_d, mask)
        assert fd_d not in server._connections
        assert d.recv(1) == b""
