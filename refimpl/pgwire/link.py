"""One client's protocol connection above the core: startup, login, then the conversation.

Bytes in (`core.receive_data`), bytes out (`answer_pending`, which may go out once
`is_durable`); no sockets: while a COPY runs,
the link sends and waits for bytes through the `Transport` the server gives it. The login takes
the startup's `user` and, as the password, one of that user's tokens (sent in the clear
when asked for: the server keeps only hashes of tokens, so neither MD5 nor SCRAM, which
need the secret or a verifier made from it, can check one), then opens an engine session
on the startup's `database` (default `demo`). With `dev` there is no password: every
connection acts as admin, as over HTTP.

Rights before existence, as over HTTP: the login needs a right in the database (a role,
or SELECT on one of its tables), checked before the database is looked up, so that a user
without one gets the same 42501 whether it exists or not; every statement after it needs
one too (a REVOKE takes effect on open connections at their next statement).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from refimpl.engine import admission
from refimpl.engine.instance import Instance
from refimpl.engine.query.deadlines import Steps
from refimpl.engine.rights import ADMIN, Principal
from refimpl.engine.session import Session
from refimpl.errors import (
    BadRequest,
    Forbidden,
    KdbError,
    ProtocolError,
    Unauthorized,
    UnknownDatabase,
    UnsupportedProtocol,
)
from refimpl.pgwire import messages as m
from refimpl.pgwire import sqlstate
from refimpl.pgwire.conversation import Conversation
from refimpl.pgwire.core import ProtocolCore, error_bytes
from refimpl.pgwire.replication import ReplicationSession, may_replicate
from refimpl.pgwire.replication_stream import Walsender
from refimpl.pgwire.session_settings import REPORTED, SessionSettings
from refimpl.pgwire.states import CLOSED, COPY_MESSAGES, READY

_auth_log = logging.getLogger("refimpl.auth")

DEFAULT_DATABASE = "demo"


@dataclass(frozen=True, slots=True)
class LinkOptions:
    dev: bool = False
    max_message_bytes: int = 64 * 1024 * 1024
    tls: bool = False  # the server has a certificate: an SSLRequest is answered 'S'
    max_replication_slots: int = 10  # pg_max_replication_slots
    max_wal_senders: int = 10  # pg_max_wal_senders: replication connections at once
    # A session idle in a transaction longer is ended (its SET may change it; 0: never).
    idle_in_transaction_session_timeout_ms: int = 60_000


class Transport(Protocol):
    """The connection's socket as a statement uses it while it runs (a COPY)."""

    def send(self, data: bytes) -> None:
        """All of `data` to the client now (by the deadline of the answer it is part of,
        between `start_answer` and `end_answer`)."""

    def start_answer(self) -> None:
        """What `send` sends from now on is one answer with a deadline as a whole."""

    def end_answer(self) -> None:
        """The answer `start_answer` began is sent: later sends have no deadline of its."""

    def receive(self) -> bytes:
        """What the client sends next, waiting for it; b"" when it closed. Raises
        ProtocolError when nothing comes in time, Unavailable when the server stops."""


class Link:
    """Startup, login and the conversation of one connection; one thread at a time.

    It is the conversation's `copy_flow.Wire`: answers sent before the message's answer is
    whole, and the client's copy messages read as the COPY asks for them.
    """

    def __init__(
        self,
        instance: Instance,
        options: LinkOptions,
        process_id: int,
        secret_key: int,
        on_cancel: Callable[[int, int], None],
        transport: Transport,
        on_login: Callable[[Principal], str | None] = lambda principal: None,
        on_notification: Callable[[], None] = lambda: None,
    ) -> None:
        """`on_login(principal)`: called once the password is right, before the session
        opens; it answers why the server refuses the login (a connection limit), or None.
        `on_notification()`: notifications arrived for the connection (from any thread)."""
        self._on_login = on_login
        self._on_notification = on_notification
        self.instance = instance
        self.options = options
        self.core = ProtocolCore(options.max_message_bytes)
        self.process_id = process_id
        self.secret_key = secret_key
        self._on_cancel = on_cancel
        self._transport = transport
        self._out: list[bytes] = []  # answers encoded, not yet sent
        self._startup: dict[str, str] = {}
        self.peer = ""  # the client's address, for the log of a refused login (set by the server)
        self._secured = False  # TLS was agreed (an SSLRequest after it is answered 'N')
        self.conversation: Conversation | None = None
        # A `replication=database` login's replication commands (spec: replication).
        self.replication: ReplicationSession | None = None
        # The conversation's session, kept past its end: answers sent as the connection
        # closes may still acknowledge its last commits.
        self._session: Session | None = None
        self._running = False  # a worker answers this connection's messages now
        self._steps: Steps | None = None  # once logged in: its pipelines' turns
        self._cancel = threading.Event()
        # Whether a whole message waited unanswered when `answer_pending` returned (or the
        # client had closed): nothing is received between its return and the caller's look,
        # nor until the server's next read (but for a stream's end, which sets it again).
        self.more = False

    @property
    def closed(self) -> bool:
        return self.core.state is CLOSED

    def answer_pending(self, limit: int = 1 << 62) -> bytes:
        """Answer the whole messages received, in order, until the answers reach `limit`
        bytes (the rest wait in `core`); the bytes to send once `is_durable()` (then close
        if `closed`)."""
        core = self.core
        out = self._out
        size = 0
        if self._cancel.is_set():  # a late cancel of the last statement (clear() locks)
            self._cancel.clear()
        self._running = True
        # The thread watches this flag until its next connection's answers: no statement
        # runs on a server's worker between them, and `cancel` sets it only while running.
        admission.watch_cancel(self._cancel)
        closed, send = CLOSED, core.send
        # Messages pipelined past the first turn are their user's long work: they take turns
        # with other users' (spec: pgwire, turns), across calls while more wait.
        steps = self._steps
        if steps is None:
            steps = Steps(None if self._session is None else self._session.principal.name)
            self._steps = steps if self._session is not None else None
        drained = False  # every byte received was read: no whole message waits
        try:
            # After START_REPLICATION the walsender reads what the client sends next.
            while size < limit and (self.replication is None or self.walsender() is None):
                conversation = self.conversation
                if conversation is not None:
                    # A prepared statement's Bind, Describe, Execute and Sync, answered at
                    # once: framed as the last run's (its values alone read), or read whole.
                    fast: bytes | list[m.ServerMessage] | None = None
                    quick = conversation.quick
                    if (
                        quick is not None
                        and (values := core.next_known_run(quick.frame)) is not None
                    ):
                        steps.next()
                        fast = conversation.run_known(quick, values)
                    elif run := core.next_run(conversation.runs_together):
                        steps.next()
                        fast = conversation.run_bytes(run[0], run[1], run[2], run[4])
                        if fast is None:
                            fast = conversation.answer_run(run[0], run[1], run[2])
                    if fast is not None:
                        if isinstance(fast, bytes):
                            data = core.sent_run(fast)
                        else:
                            data = core.send_run(fast)  # a failed run's answers
                        out.append(data)
                        size += len(data)
                        if core.drained():
                            drained = True
                            break  # one run a request, as most clients send: nothing more
                        continue
                if (message := core.next_message()) is None:
                    break
                steps.next()
                for answer in self._answer(message):
                    if core.state is closed:
                        break  # it ended inside a COPY: no one is left to answer
                    data = send(answer)
                    out.append(data)
                    size += len(data)
                if core.state is closed:
                    break
        except ProtocolError as error:
            core.close()
            code = sqlstate.sqlstate_of(error)
            core.failed(code)
            out.append(error_bytes(code, error.message))
        finally:
            # Drained: no message waits (but the client's end may have come).
            self.more = core.client_closed if drained else core.has_message()
            steps.end(more=self.more)
            self._running = False
        if core.client_closed and core.state is not closed:
            core.close()
        if core.state is closed:
            self.end()
        data = b"".join(out)
        out.clear()
        return data

    def notifications(self) -> bytes:
        """NotificationResponses for the connection between two messages (outside a
        transaction, with nothing else to answer); a connection that overflowed its
        notifications gets its FATAL error and is closed."""
        conversation = self.conversation
        if conversation is None or self.core.state is not READY:
            return b""
        try:
            return b"".join(
                self.core.send(n) for n in conversation.inbox.messages(conversation.status)
            )
        except ProtocolError as error:
            code = sqlstate.sqlstate_of(error)
            self.core.failed(code)  # counted with what `send` sent (`take_counts`)
            return self.refuse(code, error.message)

    def notifications_waiting(self) -> bool:
        """Whether `notifications()` has something to send now."""
        conversation = self.conversation
        return (
            conversation is not None
            and conversation.inbox.waiting()  # first: false after nearly every answer
            and conversation.status == "I"
            and self.core.state is READY
        )

    def is_durable(self) -> bool:
        """True when what `answer_pending` gave may go out now: every commit it acknowledges
        is on disk (commits do not wait for their flush; see `refimpl.pgwire.acknowledging`)."""
        return self._session is None or self._session.is_durable()

    def wait_durable(self) -> None:
        """Block until what `answer_pending` gave may go out (raises WritesStopped)."""
        if self._session is not None:
            self._session.wait_durable()

    # -- the conversation's Wire ---------------------------------------------------------

    def send(self, answers: Sequence[m.ServerMessage]) -> None:
        # Answers before these may acknowledge a commit (an INSERT before a COPY in one
        # query): they wait for its flush here, on the worker, which is rare.
        self.wait_durable()
        self._out.extend(self.core.send(answer) for answer in answers)
        data = b"".join(self._out)
        self._out.clear()
        self._transport.send(data)

    def start_answer(self) -> None:
        self._transport.start_answer()

    def end_answer(self) -> None:
        self._transport.end_answer()

    def next_copy_message(self) -> m.CopyData | m.CopyDone | m.CopyFail:
        core = self.core
        while True:
            message = core.next_message()
            if isinstance(message, COPY_MESSAGES):
                return message
            if core.state is CLOSED or core.client_closed:
                core.close()
                raise ProtocolError("the connection ended inside COPY; nothing was copied")
            try:
                data = self._transport.receive()
            except ProtocolError:
                core.close()
                raise
            core.receive_data(data)

    def walsender(self) -> Walsender | None:
        """The stream START_REPLICATION set up: the server runs it and hands the connection
        back (`resume_after_stream`) or closes it."""
        return None if self.replication is None else self.replication.walsender

    def resume_after_stream(self, data: bytes) -> None:
        """The client ended its stream with CopyDone; `data` is what it sent after it."""
        if self.replication is not None:
            self.replication.walsender = None
        if data:
            self.core.receive_data(data)
            self.more = self.core.has_message()

    def cancel(self) -> None:
        """A CancelRequest for this connection: its running statement stops at its next
        check (long scans check every few thousand rows); idle, nothing happens."""
        if self._running:
            self._cancel.set()

    def end(self) -> None:
        """The connection is over: an open transaction is rolled back."""
        self.core.close()
        if self.conversation is not None:
            self.conversation.close()
            self.conversation = None
        if self.replication is not None:
            self.replication.end()

    def refuse(self, code: str, message: str) -> bytes:
        """A FATAL error for a connection the server ends (a limit, a shutdown)."""
        self.end()
        return error_bytes(code, message)

    def _answer(self, message: m.ClientMessage) -> list[m.ServerMessage]:
        if self.conversation is not None:
            if isinstance(message, m.Terminate):
                self.end()
                return []
            if self.replication is not None and isinstance(message, m.Query):
                answers = self.replication.answer(message.text)
                if answers is not None:
                    return answers
            return self.conversation.answer(message)
        if isinstance(message, m.SslRequest) and self.options.tls and not self._secured:
            self._secured = True  # the server wraps the socket once 'S' is sent
            return [m.SslAccepted()]
        if isinstance(message, m.SslRequest | m.GssEncRequest):
            return [m.SslRefused()]
        if isinstance(message, m.CancelRequest):
            self._on_cancel(message.process_id, message.secret_key)
            return []
        if isinstance(message, m.Startup):
            self._startup = message.parameters
            if "user" not in message.parameters:
                self._log_refused(None, "no user name in the startup message")
                return [
                    m.ErrorResponse(
                        "28000",
                        "no user name was given in the startup message; connect with a user name",
                        "FATAL",
                    )
                ]
            if self.options.dev:
                return self._login(ADMIN)
            return [m.AuthenticationCleartextPassword()]
        if isinstance(message, m.Password):
            return self._password(message.password)
        return []

    def _log_refused(self, user: str | None, reason: str) -> None:
        """A refused login's line in the server's log (logger `refimpl.auth`, WARNING, as
        over HTTP): the client's address and the user it named; never the password."""
        whose = "" if user is None else f" (user '{user}')"
        _auth_log.warning(
            "refused login from %s with a PostgreSQL password%s: %s",
            self.peer,
            whose,
            reason,
            extra={
                "fields": {"client": self.peer, "credential": "a PostgreSQL password", "user": user}
            },
        )

    def _password(self, password: str) -> list[m.ServerMessage]:
        user = self._startup["user"]
        try:
            principal = self.instance.access.authenticate(password)
        except Unauthorized as error:
            self._log_refused(user, error.message)
            return [
                m.ErrorResponse(
                    sqlstate.INVALID_PASSWORD,
                    f'password authentication failed for user "{user}":'
                    f" {error.message}; send one of the user's tokens as"
                    " the password",
                    "FATAL",
                )
            ]
        if (principal.name or "").lower() != user.lower():
            self._log_refused(user, f"the token belongs to {principal.describe()}")
            return [
                m.ErrorResponse(
                    sqlstate.INVALID_PASSWORD,
                    f'password authentication failed for user "{user}":'
                    f" the token belongs to {principal.describe()}; connect"
                    " as that user or send one of this user's tokens",
                    "FATAL",
                )
            ]
        return self._login(principal)

    def _login(self, principal: Principal) -> list[m.ServerMessage]:
        database = self._startup.get("database") or DEFAULT_DATABASE
        try:
            # First: a physical replication connection names no real database.
            replication = self._replication(principal, database)
            self.instance.access.check_any(principal, database)  # before existence
            if not self.instance.has_database(database):
                raise UnknownDatabase(database)
            refusal = self._on_login(principal)
            if refusal is not None:
                return [m.ErrorResponse(sqlstate.TOO_MANY_CONNECTIONS, refusal, "FATAL")]
            session = self.instance.session(database, principal, acknowledge_later=True)
            settings = SessionSettings(
                self._startup, principal.name or "", principal.is_admin, self._server_settings()
            )
            session.lock_timeout = settings.seconds("lock_timeout")
        except KdbError as error:
            return [m.ErrorResponse(sqlstate.sqlstate_of(error), error.message, "FATAL")]
        access = self.instance.access
        self.conversation = Conversation(
            session, settings, self, lambda: access.check_any(principal, database)
        )
        self.conversation.inbox.attach(self.instance, self.process_id, self._on_notification)
        self._session = session
        self.replication = replication
        out: list[m.ServerMessage] = [m.AuthenticationOk()]
        out += [m.ParameterStatus(name, settings.values[name]) for name in REPORTED]
        out += [m.BackendKeyData(self.process_id, self.secret_key), m.ReadyForQuery("I")]
        return out

    def _server_settings(self) -> dict[str, str]:
        """The session settings whose defaults are the server's (kdb.conf's)."""
        idle = self.options.idle_in_transaction_session_timeout_ms
        lock = round(self.instance.options.lock_timeout * 1000)
        return {"idle_in_transaction_session_timeout": str(idle), "lock_timeout": str(lock)}

    def _replication(self, principal: Principal, database: str) -> ReplicationSession | None:
        """The startup's `replication` parameter: `database` makes a replication connection
        (it needs the REPLICATION right), a physical one is refused (spec: replication)."""
        value = self._startup.get("replication", "false").strip().lower()
        if value in ("false", "off", "no", "0"):
            return None
        if value in ("true", "on", "yes", "1"):
            raise UnsupportedProtocol(
                "physical replication is not supported: connect with replication=database"
                " for logical replication"
            )
        if value != "database":
            raise BadRequest(f'invalid value for parameter "replication": "{value}"')
        if not may_replicate(self.instance, principal):
            raise Forbidden("must be superuser or replication role to start walsender")
        options = self.options
        return ReplicationSession.open(
            self.instance,
            database,
            principal,
            self.process_id,
            options.max_replication_slots,
            options.max_wal_senders,
        )
