"""The PostgreSQL protocol server's settings (`PgOptions`), apart from the server itself
(`refimpl.pgwire.serving`) so that a caller names them without its machinery."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from refimpl.netlimits import ConnectionLimits
from refimpl.pgwire.link import LinkOptions


@dataclass(frozen=True, slots=True)
class PgOptions:
    host: str = "127.0.0.1"
    port: int = 5432
    threads: int = 16
    limits: ConnectionLimits = field(
        default_factory=lambda: ConnectionLimits(
            100, 100, "pg_max_connections", "pg_max_connections"
        )
    )
    link: LinkOptions = field(default_factory=LinkOptions)
    tls: ssl.SSLContext | None = None  # given: an SSLRequest is answered 'S' (link.tls too)
    # A connection must be logged in this long after it was accepted (PostgreSQL's
    # authentication_timeout): one that never finishes its startup costs bounded descriptors.
    login_timeout_s: float = 10.0
    unauthenticated_per_address: int = 16
