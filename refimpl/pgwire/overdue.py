"""The connections the PostgreSQL server ends for time (`refimpl.pgwire.serving` looks at
them about once a second, or sooner when one is due): those not logged in within
`pg_login_timeout_s`, those whose answers the client does not take, and sessions idle in
a transaction longer than their idle_in_transaction_session_timeout (PostgreSQL's FATAL
25P03), whose open transaction holds their database's write lock and so every writer off.
Nothing here runs per statement: a connection's ReadyForQuery in a transaction notes when
it went idle (`Conversation.ready_status`), and only this look reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from refimpl.pgwire.clients import Client

IDLE_IN_TRANSACTION_TIMEOUT = "25P03"  # idle_in_transaction_session_timeout
LOOK_EVERY_SECONDS = 1.0  # at most this long between two looks


def idle_timed_out(seconds: float) -> str:
    """What an idle session ended is told: PostgreSQL's words, then what happened and what
    to do."""
    return (
        "terminating connection due to idle-in-transaction timeout: the session stayed idle"
        f" in a transaction longer than idle_in_transaction_session_timeout ({seconds:g} s),"
        " which held its database's writers off; the transaction was rolled back. Commit or"
        " roll back sooner, or SET idle_in_transaction_session_timeout higher"
    )


@dataclass
class Overdue:
    """What one look found: the connections to end, and when to look next."""

    late: list[Client] = field(default_factory=list)  # not logged in in time
    stalled: list[Client] = field(default_factory=list)  # its answers not taken
    idle: list[tuple[Client, float]] = field(default_factory=list)  # with its timeout
    next_look: float = 0.0

    def all(self) -> list[Client]:
        return self.late + self.stalled + [client for client, _ in self.idle]


def look(clients: Iterable[Client], now: float, login_timeout: float, send_pause: float) -> Overdue:
    """The connections of `clients` not answered now (not `busy`) that are overdue at `now`."""
    found = Overdue(next_look=now + LOOK_EVERY_SECONDS)
    for client in clients:
        if client.busy:
            continue
        if client.stalled(now, send_pause):
            found.stalled.append(client)
            continue
        if not client.logged_in:
            if now - client.accepted_at > login_timeout:
                found.late.append(client)
            continue
        conversation = client.link.conversation
        # Idle once a ReadyForQuery went out: not while an extended query waits for its Sync.
        if conversation is None or conversation.status == "I" or not conversation.idle_since:
            continue
        timeout = conversation.settings.seconds("idle_in_transaction_session_timeout")
        if not timeout:
            continue
        due = conversation.idle_since + timeout
        if now >= due:
            found.idle.append((client, timeout))
        else:
            found.next_look = min(found.next_look, due)
    return found
