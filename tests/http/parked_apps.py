"""What the tests of the server's waiting mechanism share, apart from any route: a small
WSGI app of the test's own served by the real server (`PooledWSGIServer` on a loopback
port, real sockets), and a request parked there until the test decides it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from refimpl.http.encode import Answer
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom
from tests.http.conftest import pooled_server


class RoomApp(Protocol):
    """A WSGI app that parks its requests in its own waiting room."""

    waiting_room: WaitingRoom

    def __call__(self, environ: dict, start_response: Callable) -> object: ...


App = TypeVar("App", bound=RoomApp)


@contextmanager
def serving(app: App) -> Iterator[tuple[App, tuple[str, int]]]:
    """`app` and the loopback address it is served at, while inside; at the end, its waiting
    room closed (what is parked answered with its closing answer), then the server stopped."""
    with pooled_server(app) as server:
        try:
            yield app, ("127.0.0.1", server.server_port)
        finally:
            app.waiting_room.close()


def held(
    kind: Kind, at_close: Callable[[], Answer], on_drained: Callable[[], None] | None = None
) -> Parked[Answer]:
    """A request parked for a minute that only the test decides: no commit signal, no attempt
    of its own, nothing at its deadline; `at_close` is its answer when the room closes."""
    return Parked(
        None,
        0,
        lambda _: None,
        lambda: None,
        time.monotonic() + 60,
        lambda: None,
        kind=kind,
        at_close=at_close,
        on_drained=on_drained,
    )
