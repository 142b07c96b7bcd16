"""One-time tickets: how a browser's `EventSource`, which cannot send a header, opens a stream.

The protocol layer gives a ticket for the token its request came with; the stream's URL
carries it (`?ticket=`). A ticket is random (256 bits), works once (also when the connect it
was used for is then refused, or refused before the ticket was looked at: `discard`), only
in the database it was asked for, and expires after `ttl` seconds. Only its SHA-256 hash is
kept, in memory: a restart ends every ticket, and a ticket is never written to a file or a
log line.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from refimpl.engine.access.store import name_key, secret_hash
from refimpl.errors import Unauthorized

TICKET_PREFIX = "kdbt_"
TICKETS_PER_TOKEN = 100  # outstanding at once; one more ends the token's oldest


@dataclass(frozen=True, slots=True)
class Ticket:
    token_key: str  # the hash of the token that asked for it
    database: str  # the database's key
    expires_at: float  # seconds since the epoch


class TicketBook:
    """Tickets by the hash of their text. Thread-safe; `clock` gives seconds since the epoch;
    `asked_at` names where a new ticket is asked for, in the errors' sentences (the protocol
    layer's route)."""

    def __init__(
        self,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
        per_token: int = TICKETS_PER_TOKEN,
        asked_at: str = "the ticket route",
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self._asked_at = asked_at
        self._clock = clock
        self._per_token = per_token
        self._lock = threading.Lock()
        self._tickets: dict[str, Ticket] = {}  # insertion order: the oldest first

    def issue(self, token_key: str, database: str) -> tuple[str, float]:
        """A new ticket for the token with hash `token_key`, and when it expires."""
        text = TICKET_PREFIX + secrets.token_urlsafe(32)
        now = self._clock()
        ticket = Ticket(token_key, name_key(database), now + self.ttl_seconds)
        with self._lock:
            self._sweep(now)
            mine = [h for h, t in self._tickets.items() if t.token_key == token_key]
            for hashed in mine[: max(0, len(mine) - self._per_token + 1)]:
                del self._tickets[hashed]
            self._tickets[secret_hash(text)] = ticket
        return text, ticket.expires_at

    def redeem(self, text: str, database: str) -> str:
        """The token key a ticket stands for; the ticket is used up, whatever comes next.

        Unauthorized when it is unknown, used, expired, or for another database.
        """
        with self._lock:
            ticket = self._tickets.pop(secret_hash(text), None)
        if ticket is None or ticket.expires_at <= self._clock():
            raise Unauthorized(
                "the ticket is wrong, expired or used already; a ticket works once: get a new"
                f" one from {self._asked_at} before every connect"
            )
        if ticket.database != name_key(database):
            raise Unauthorized(
                f"the ticket was given for another database; ask {self._asked_at} with the"
                " db= of the stream"
            )
        return ticket.token_key

    def discard(self, texts: list[str]) -> None:
        """Uses up the tickets `texts` (those unknown are passed over): a connect that named
        a ticket and was refused before it redeemed it (a bad parameter, a ticket plus a
        header) used it all the same."""
        with self._lock:
            for text in texts:
                self._tickets.pop(secret_hash(text), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._tickets)

    def _sweep(self, now: float) -> None:
        for hashed in [h for h, t in self._tickets.items() if t.expires_at <= now]:
            del self._tickets[hashed]
