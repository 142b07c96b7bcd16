"""TLS on the PostgreSQL port: the server's context, and a handshake that never blocks.

With a certificate (`pg_tls_cert`, `pg_tls_key`) an SSLRequest is answered 'S' and the
connection's socket is wrapped; the reading thread then moves the handshake on each time
the socket is ready (`step`), so a client that stalls mid-handshake holds no
thread: the startup timeout ends it like any connection that never logs in.
"""

from __future__ import annotations

import enum
import select
import ssl
from pathlib import Path

from refimpl.errors import ConfigError


def server_context(cert: Path, key: Path | None) -> ssl.SSLContext:
    """The TLS context of a certificate (PEM, with its chain) and its key (None: in the same
    file); ConfigError when they do not load. TLS 1.2 at least, as libpq 15 asks."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"the PostgreSQL TLS certificate {cert}{f' with key {key}' if key else ''} does not"
            f" load: {getattr(error, 'strerror', None) or error}; give a PEM certificate"
            " (pg_tls_cert) and its private key (pg_tls_key)"
        ) from None
    return context


class Step(enum.Enum):
    DONE = "done"
    WANTS_READ = "wants read"
    WANTS_WRITE = "wants write"
    FAILED = "failed"


def step(sock: ssl.SSLSocket) -> Step:
    """Move a non-blocking server-side handshake on as far as the socket allows."""
    try:
        sock.do_handshake()
    except ssl.SSLWantReadError:
        return Step.WANTS_READ
    except ssl.SSLWantWriteError:
        return Step.WANTS_WRITE
    except (ssl.SSLError, OSError):
        return Step.FAILED
    return Step.DONE


# The epoll events a step waits for (one-shot: the reading thread re-arms after each).
EVENTS = {
    Step.WANTS_READ: select.EPOLLIN | select.EPOLLONESHOT,
    Step.WANTS_WRITE: select.EPOLLOUT | select.EPOLLONESHOT,
}
