"""LISTEN, UNLISTEN, NOTIFY and `pg_notify(channel, payload)` on one connection.

A connection's `Inbox` holds the notifications it sent inside a transaction until the
transaction ends: a COMMIT publishes them (`NotificationHub.publish`), a ROLLBACK drops
them, as PostgreSQL does; outside a transaction a NOTIFY is its own transaction and is
published at once. What others sent it waits in its engine `Listener` and goes out as
NotificationResponse messages between statements, when the connection is not inside a
transaction (`messages`), or to an idle connection as soon as a worker is free, woken by
the listener's `wake`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from refimpl.engine.instance import Instance
from refimpl.engine.notifications import (
    MAX_PAYLOAD_BYTES,
    QUEUE_BYTES,
    Listener,
    Notification,
    NotificationHub,
    check_channel,
    hub_of,
)
from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.session import Session
from refimpl.errors import BadRequest, NotAllowed, NotificationsOverflow
from refimpl.pgwire import messages as m
from refimpl.sql import ast
from refimpl.sql.ast_copy import Listen, Notify, Unlisten

STATEMENTS = (Listen, Unlisten, Notify)


def pg_notify_call(statement: ast.Statement | None) -> ast.FuncCall | None:
    """`SELECT pg_notify(channel, payload)` alone (no FROM, one item), else None: the form
    clients send it in; it runs as a NOTIFY."""
    if not isinstance(statement, ast.Select) or statement.source is not None:
        return None
    if len(statement.items) != 1:
        return None
    call = statement.items[0].expr
    if isinstance(call, ast.FuncCall) and call.name.lower() in (
        "pg_notify",
        "pg_catalog.pg_notify",
    ):
        return call
    return None


class Inbox:
    """One connection's notifications: those it sent, pending until its commit, and those
    sent to it."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._hub: NotificationHub | None = None  # None until `attach`
        self._process_id = 0
        self._wake: Callable[[], None] = lambda: None
        self._listener: Listener | None = None
        self._pending: list[Notification] = []

    def attach(self, instance: Instance, process_id: int, wake: Callable[[], None]) -> None:
        """Join the instance's notifications as process `process_id`; `wake()` is called
        (cheap, from any thread) when notifications arrive for this connection."""
        self._hub = hub_of(instance)
        self._process_id = process_id
        self._wake = wake

    def _joined(self) -> NotificationHub:
        if self._hub is None:
            raise NotAllowed("LISTEN and NOTIFY are served over the PostgreSQL protocol only")
        return self._hub

    def run(self, statement: ast.Statement | None, params: Sequence[object]) -> Result:
        """Answer a LISTEN, UNLISTEN, NOTIFY or `SELECT pg_notify(...)`."""
        session, hub = self._session, self._joined()
        if isinstance(statement, Listen):
            if self._listener is None:
                self._listener = hub.listener(session.database.name, session.principal, self._wake)
            hub.listen(self._listener, statement.channel)
            return message_result("LISTEN", "LISTEN")
        if isinstance(statement, Unlisten):
            if self._listener is not None:
                hub.unlisten(self._listener, statement.channel)
            return message_result("UNLISTEN", "UNLISTEN")
        if isinstance(statement, Notify):
            self._notify(statement.channel, statement.payload)
            return message_result("NOTIFY", "NOTIFY")
        call = pg_notify_call(statement)
        assert call is not None
        if len(call.args) != 2:
            raise BadRequest("pg_notify() takes two arguments: a channel's name and a payload")
        channel, payload = (_argument(arg, params) for arg in call.args)
        if channel is None:
            raise BadRequest("pg_notify() takes a channel's name, not NULL")
        self._notify(channel, payload or "")
        return query_result("SELECT pg_notify", [Column("pg_notify", "STRING")], [(None,)])

    def _notify(self, channel: str, payload: str) -> None:
        check_channel(channel)
        if len(payload.encode("utf-8")) > MAX_PAYLOAD_BYTES:
            raise BadRequest(
                f"payload string too long: a notification's payload takes at most"
                f" {MAX_PAYLOAD_BYTES} bytes; send a key and read the rest from a table"
            )
        note = Notification(channel, payload, self._process_id)
        if self._session.transaction is None:
            self._joined().publish(self._session.database.name, [note])
        elif note not in self._pending:  # PostgreSQL sends a repeated one once
            self._pending.append(note)

    def rolled_back(self) -> None:
        """The transaction ended without its commit: its notifications are dropped."""
        self._pending.clear()

    def committed(self) -> None:
        """The transaction committed: its notifications are published (a later one of the
        same text may still be rolled back without them)."""
        if self._pending and self._hub is not None:
            pending, self._pending = self._pending, []
            self._hub.publish(self._session.database.name, pending)

    def messages(self, status: str) -> list[m.ServerMessage]:
        """With the connection outside a transaction (`status` 'I'): the notifications its
        commit sent (published now), then those waiting for it, as NotificationResponses."""
        if status != "I" or self._hub is None:
            return []
        self.committed()
        listener = self._listener
        if listener is None or not listener.waiting():
            return []
        if listener.overflowed:
            raise NotificationsOverflow(
                f"this connection read its notifications too slowly: more than"
                f" {QUEUE_BYTES // 1024} kB of them waited unread, so the server ends it; read"
                " notifications as they come (or LISTEN to fewer channels) and reconnect"
            )
        return [m.NotificationResponse(n.pid, n.channel, n.payload) for n in listener.take()]

    def waiting(self) -> bool:
        """Whether notifications may wait to be sent (or the listener overflowed)."""
        return self._listener is not None and self._listener.waiting()

    def close(self) -> None:
        """The connection ended: it listens to nothing more; unsent notifications go."""
        self._pending.clear()
        if self._listener is not None and self._hub is not None:
            self._hub.unlisten(self._listener, None)


def _argument(expr: ast.Expr, params: Sequence[object]) -> str | None:
    if isinstance(expr, ast.Literal) and (expr.value is None or isinstance(expr.value, str)):
        return expr.value
    if isinstance(expr, ast.Param) and expr.index < len(params):
        value = params[expr.index]
        return value if isinstance(value, str) else None
    raise BadRequest(
        "pg_notify() takes its channel and payload as constants or parameters ($1), not expressions"
    )
