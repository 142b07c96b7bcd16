"""A `Connection` served directly, without a server: a stand-in for what it uses of its
server (`connection.Host`), on its end of a loopback TCP connection."""

from __future__ import annotations

import socket
from typing import Any

from refimpl.http.serving.connection import Connection
from refimpl.http.serving.limits import ConnectionCounts, ConnectionLimits


class Host:
    """What a connection uses of its server: `app`, an address, a body limit of 1 MB and
    connection counts of the default limits."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.server_address = ("127.0.0.1", 9000)
        self.max_body_bytes = 1 << 20
        self.counts = ConnectionCounts(ConnectionLimits())


def connected(app: Any) -> tuple[Connection, socket.socket]:
    """A connection answering with `app` and the client's end of its socket (loopback TCP, as
    a server's: a socket pair would refuse TCP_NODELAY); the caller closes both."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    return Connection(ours, ("127.0.0.1", 5), Host(app)), theirs
