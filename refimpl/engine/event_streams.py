"""The event streams of one instance, as a protocol layer opens and serves them.

What a caller (the HTTP layer's `/stream/changes`) may rely on:

- `credential_for_token`, `credential_for_session` and `credential_for_ticket` say who asks
  and under which token its streams count; `tickets` gives the one-time tickets.
- `open` checks, in this order, that the server takes streams (503 while shutting down or at
  `capacity`), the caller's rights before the existence of what it names (401/403, then 404),
  and the limits per token and per user (429, `TooManyRequests`), where a reconnect that
  carries the last id of a stream of the same token still counted as open (a half-open
  connection) takes that stream over instead of being refused.
- An `OpenStream` is woken (its `waker`) at every durable commit of its database, and when
  it must end: once a second at most after its token expires or is dropped, its caller's
  right to the database is revoked, the database is dropped, or it has been open
  `max_age_s`; `take` then says why (`ended`).
- `read_row` reads a row's current state by the key its events carry (the events' `href`).

Nothing here knows HTTP: events are typed (`Event`), encoded by the protocol layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import msgspec

from refimpl.engine.access import AccessControl, Principal, Right
from refimpl.engine.access.tickets import TicketBook
from refimpl.engine.features.event_stream import (
    EventCursor,
    Position,
    RecentTransactions,
    Taken,
)
from refimpl.engine.features.feed_options import FeedOptions
from refimpl.engine.features.initial_copy import CopyPosition
from refimpl.engine.features.stream_options import OptionCursor, StreamFeed
from refimpl.engine.instance import Instance
from refimpl.engine.result import Column
from refimpl.engine.storage.database import Database
from refimpl.engine.tracking.signals import Waker
from refimpl.errors import (
    BadRequest,
    KdbError,
    NotFound,
    TooManyRequests,
    Unavailable,
)

Cursor = EventCursor | OptionCursor  # a plain stream's place, or one with options
SWEEP_SECONDS = 0.5  # how often tokens, rights and ages of open streams are looked at
RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """The event stream's settings (spec/settings.md), in seconds and counts."""

    heartbeat_s: float = 25.0
    max_age_s: float = 1800.0
    replay_s: float = 300.0
    ticket_ttl_s: float = 60.0
    per_token: int = 3
    per_user: int = 10
    capacity: int = 1000
    buffer_kb: int = 256


@dataclass(frozen=True, slots=True)
class Credential:
    """Who opens a stream, and the key of the token its limits count against.

    `checked`: whether the token is looked at again while the stream is open (not where
    there are no tokens, as with `--dev`)."""

    token_key: str
    principal: Principal
    checked: bool = True


class OpenStream:
    """One open event stream: its caller, its place, and why it ended (None: it goes on)."""

    def __init__(
        self,
        number: int,
        database: str,
        credential: Credential,
        access: AccessControl,
        named: frozenset[str] | None,
        cursor: Callable[[Callable[[str], bool], Callable[[], Hashable]], Cursor],
        ends_at: float,
    ) -> None:
        self.number = number
        self.database = database
        self.credential = credential
        self.principal = credential.principal  # as the latest look at its token found it
        self.ends_at = ends_at  # time.monotonic() at which its max age is reached
        self.waker: Waker | None = None
        self.last_id: str | None = None  # of the last event taken
        self.ended: str | None = None  # why it ended, one sentence
        self._access = access
        self._named = named  # the tables it follows (keys), None: every table
        self._lock = threading.Lock()
        self.cursor = cursor(self.follows, self.view)

    def follows(self, table: str) -> bool:
        """Whether the stream shows a table now: named (or any), and readable by its caller."""
        if self._named is not None and table not in self._named:
            return False
        return self._access.allowed(self.principal, self.database, Right.READ, table)

    def view(self) -> Hashable:
        """Equal for streams that follow the same tables with the same rights now (the
        principal as the latest look at its token found it): they share what they take."""
        return (self._named, self.principal)

    def take(self, budget: int) -> Taken:
        """The next events (see `EventCursor.take`); none once it has ended."""
        with self._lock:
            if self.ended is not None:
                return Taken([], False)
            taken = self.cursor.take(budget)
            if taken.events:
                self.last_id = taken.events[-1].id
            return taken

    def end(self, reason: str) -> None:
        """End the stream (its next `take` is empty) and wake whoever sends it."""
        with self._lock:
            if self.ended is not None:
                return
            self.ended = reason
        if self.waker is not None:
            self.waker.set()


@dataclass(frozen=True, slots=True)
class RowAnswer:
    """A row's current state by its key (`GET /stream/row`)."""

    database: str
    table: str
    key: str
    columns: list[Column]
    row: tuple


class EventStreams:
    """Open event streams of an instance: limits, fan-out at commits, and their ends.

    `wake_all` wakes many streams at once (the protocol layer's batch of pokes); by default
    each waker is set in turn. `clock` gives seconds since the epoch (commit times count so).
    """

    def __init__(
        self,
        instance: Instance,
        options: StreamOptions | None = None,
        wake_all: Callable[[list[Waker]], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options or StreamOptions()
        self.tickets = TicketBook(self.options.ticket_ttl_s, clock)
        self._instance = instance
        self._access: AccessControl = instance.access
        self._wake_all = wake_all or _wake_each
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[int, OpenStream] = {}
        self._by_database: dict[str, list[OpenStream]] = {}
        # By database key: the wakers of its streams, the same list at each commit until a
        # stream opens or closes (the protocol layer may keep what it derives from it).
        self._wakers: dict[str, list[Waker]] = {}
        self._recent: dict[str, RecentTransactions] = {}
        self._listening: dict[str, Database] = {}  # by key: the database object listened to
        self._numbers = iter(range(1, 2**62))
        self._closed = False
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    # -- who asks ---------------------------------------------------------------------------

    def credential_for_token(self, token: str) -> Credential:
        key = self._access.token_key(token)
        return Credential(key, self._access.principal_of_token_key(key))

    def credential_for_session(self, session_id: str) -> Credential:
        key = self._access.session_token_key(session_id)
        return Credential(key, self._access.principal_of_token_key(key))

    def credential_for_ticket(self, ticket: str, database: str) -> Credential:
        """The credential a ticket was given to; the ticket is used up."""
        key = self.tickets.redeem(ticket, database)
        return Credential(key, self._access.principal_of_token_key(key))

    def check_readable(self, principal: Principal, database: str, tables: Sequence[str]) -> str:
        """Rights before existence, as every route: the database's name as it is spelled."""
        access = self._access
        access.check_any(principal, database)
        found = self._instance.database(database)
        for table in tables:
            access.check(principal, database, Right.READ, table)
            if table.lower() not in found.tables:
                raise NotFound(f"table '{table}' does not exist in database '{found.name}'")
        return found.name

    # -- opening and ending -----------------------------------------------------------------

    def open(
        self,
        credential: Credential,
        database: str,
        tables: Sequence[str],
        resume: Position | None,
        resume_id: str | None,
        feed_options: FeedOptions | None = None,
        copy_from: CopyPosition | None = None,
    ) -> OpenStream:
        """A new stream (see the module docstring for the checks and their order); with
        `feed_options`, a stream with changefeed options (`stream_options.StreamFeed`, whose
        400s come after the rights and before the limits), `copy_from` a resume inside its
        initial copy."""
        if self._closed:
            raise Unavailable("the server is shutting down; connect again in a few seconds")
        name = self.check_readable(credential.principal, database, tables)
        found = self._instance.database(name)
        named = frozenset(t.lower() for t in tables) or None
        options = self.options
        feed = None
        if feed_options is not None and not feed_options.plain:
            feed = StreamFeed.check(found, tables, feed_options, copy_from)
        with self._lock:
            self._take_over(credential, resume_id)
            self._check_limits(credential)
            recent = self._recent_of(name, found)
            number = next(self._numbers)

            def cursor(follows: Callable[[str], bool], view: Callable[[], Hashable]) -> Cursor:
                def plain(at: Position | None) -> EventCursor:
                    return EventCursor(recent, follows, options.replay_s, self._clock, at, view)

                return plain(resume) if feed is None else feed.cursor(found, resume, plain)

            stream = OpenStream(number, name, credential, self._access, named, cursor,
                                time.monotonic() + options.max_age_s)
            self._open[number] = stream
            self._by_database.setdefault(name.lower(), []).append(stream)
            self._wakers.pop(name.lower(), None)
            self._start_sweeper()
        return stream

    def close_stream(self, stream: OpenStream) -> None:
        """The stream's connection is done: it no longer counts."""
        stream.end("the stream was closed")
        with self._lock:
            if self._open.pop(stream.number, None) is None:
                return
            streams = self._by_database.get(stream.database.lower(), [])
            if stream in streams:
                streams.remove(stream)
            self._wakers.pop(stream.database.lower(), None)

    def open_count(self) -> int:
        """Streams open now (a gauge for metrics)."""
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """Shutting down: no stream opens any more (503); the open ones are ended by their
        protocol layer, after their last durable event."""
        with self._lock:
            self._closed = True
        self._stop.set()

    def _take_over(self, credential: Credential, resume_id: str | None) -> None:
        """A reconnect over a limit with the last id of an open stream of its token ends
        that stream: its client is gone (a half-open connection) or this is that client."""
        if resume_id is None or not self._over_limit(credential):
            return
        for stream in self._open.values():
            if (
                stream.credential.token_key == credential.token_key
                and stream.ended is None
                and stream.last_id == resume_id
            ):
                self._forget(stream)
                stream.end("a reconnect with this stream's last id took it over")
                return

    def _over_limit(self, credential: Credential) -> bool:
        try:
            self._check_limits(credential)
        except KdbError:
            return True
        return False

    def _check_limits(self, credential: Credential) -> None:
        options = self.options
        live = [s for s in self._open.values() if s.ended is None]
        if len(live) >= options.capacity:
            raise Unavailable(
                f"the server holds its most open streams ({options.capacity},"
                " stream_capacity); connect again in a few seconds"
            )
        same_token = sum(1 for s in live if s.credential.token_key == credential.token_key)
        if same_token >= options.per_token:
            raise TooManyRequests(
                f"this token has {same_token} streams open, the most it may"
                f" (streams_per_token); close one, or use another token",
                RETRY_AFTER_SECONDS,
            )
        user = credential.principal.name
        same_user = sum(1 for s in live if s.credential.principal.name == user)
        if same_user >= options.per_user:
            raise TooManyRequests(
                f"user '{user}' has {same_user} streams open on this server, the most it may"
                " (streams_per_user); close one first",
                RETRY_AFTER_SECONDS,
            )

    def _forget(self, stream: OpenStream) -> None:
        """Stop counting `stream` (the caller holds the lock)."""
        self._open.pop(stream.number, None)
        streams = self._by_database.get(stream.database.lower(), [])
        if stream in streams:
            streams.remove(stream)
        self._wakers.pop(stream.database.lower(), None)

    def _recent_of(self, name: str, found: Database) -> RecentTransactions:
        """The shared recent transactions of a database, listened to at its commits (the
        caller holds the lock)."""
        key = name.lower()
        if self._listening.get(key) is not found:
            self._listening[key] = found
            self._recent[key] = RecentTransactions(found, name)
            found.commits.listen(lambda: self._commit(key, found))
        return self._recent[key]

    def _commit(self, key: str, database: Database) -> None:
        """A durable commit (the publishing thread: cheap, never blocking): wake its streams."""
        with self._lock:
            if self._listening.get(key) is not database:
                return  # a dropped database's signal
            wakers = self._wakers.get(key)
            if wakers is None:
                streams = self._by_database.get(key, ())
                wakers = [s.waker for s in streams if s.waker is not None]
                if len(wakers) == len(streams):  # kept once every stream has its waker
                    self._wakers[key] = wakers
        if wakers:
            self._wake_all(wakers)

    # -- the sweep --------------------------------------------------------------------------

    def _start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = threading.Thread(target=self._sweep, name="kdb-streams", daemon=True)
            self._sweeper.start()

    def _sweep(self) -> None:
        while not self._stop.wait(SWEEP_SECONDS):
            self.sweep_once()

    def sweep_once(self) -> None:
        """End the streams whose token, right, database or age is over (one look at each
        token, however many streams it holds)."""
        with self._lock:
            streams = [s for s in self._open.values() if s.ended is None]
        now = time.monotonic()
        principals: dict[str, Principal | None] = {}
        for stream in streams:
            key = stream.credential.token_key
            if not stream.credential.checked:
                principals[key] = stream.credential.principal
            elif key not in principals:
                try:
                    principals[key] = self._access.principal_of_token_key(key)
                except KdbError:
                    principals[key] = None
            principal = principals[key]
            if principal is None:
                stream.end("the token expired or was dropped")
            elif not self._instance.has_database(stream.database):
                stream.end(f"database '{stream.database}' was dropped")
            elif not self._holds_any(principal, stream.database):
                stream.end(f"the right to database '{stream.database}' was revoked")
            elif now >= stream.ends_at:
                stream.end(f"the stream reached its most age ({self.options.max_age_s:g} s)")
            else:
                stream.principal = principal

    def _holds_any(self, principal: Principal, database: str) -> bool:
        try:
            self._access.check_any(principal, database)
        except KdbError:
            return False
        return True

    # -- rows by key ------------------------------------------------------------------------

    def read_row(self, principal: Principal, database: str, table: str, key: str) -> RowAnswer:
        """The row with `key` (hex, as events carry it) as it is now; 404 once it is gone."""
        self._access.check(principal, database, Right.READ, table)
        found = self._instance.database(database)
        part, ident = _decode_key(key)
        with found.state_lock:
            stored = found.tables.get(table.lower())
            if stored is None:
                raise NotFound(f"table '{table}' does not exist in database '{found.name}'")
            schema = stored.schema
            row = stored.get(ident) if stored.part_of_ident(ident) == part else None
        if row is None:
            raise NotFound(f"no row with key {key} in table '{schema.name}': it is gone")
        columns = [Column(c.name, c.type) for c in schema.columns]
        return RowAnswer(found.name, schema.name, key, columns, row)


def _wake_each(wakers: list[Waker]) -> None:
    for waker in wakers:
        waker.set()


def _decode_key(key: str) -> tuple[tuple, tuple]:
    try:
        part, ident = msgspec.msgpack.decode(bytes.fromhex(key))
        return tuple(part), tuple(ident)
    except (ValueError, TypeError, msgspec.DecodeError):
        shown = key if len(key) <= 40 else key[:40] + "..."
        raise BadRequest(
            f"the parameter 'key' must be a row's key as the stream's events give it (hex),"
            f" not '{shown}'"
        ) from None
