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
- `join` puts a current stream into the `StreamGroup` of the streams with its view at its
  place: the group takes once for all of them, and a member that leaves (it takes alone, it
  ends, its view changes) stands where the group stands; nothing is missed or repeated.
- `read_row` reads a row's current state by the key its events carry (the events' `href`).

Nothing here knows HTTP: events are typed (`Event`), encoded by the protocol layer.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from refimpl.engine import stream_rows
from refimpl.engine.access import AccessControl, Principal, Right
from refimpl.engine.access.tickets import TicketBook
from refimpl.engine.features.event_cursor import (
    NO_LINKS,
    EventCursor,
    Links,
    Position,
    Taken,
)
from refimpl.engine.features.feed_options import FeedOptions
from refimpl.engine.features.initial_copy import CopyPosition
from refimpl.engine.features.recent_transactions import RecentTransactions
from refimpl.engine.features.stream_options import OptionCursor, StreamFeed
from refimpl.engine.instance import Instance
from refimpl.engine.measures import StreamCounts, StreamMeasures
from refimpl.engine.storage.database import Database
from refimpl.engine.stream_rows import RowAnswer
from refimpl.engine.stream_tally import StreamTally, stands_after
from refimpl.engine.tracking.signals import Waker
from refimpl.errors import RETRY_AFTER_SECONDS, KdbError, NotFound, TooManyRequests, Unavailable

Cursor = EventCursor | OptionCursor  # a plain stream's place, or one with options
SWEEP_SECONDS = 0.5  # how often tokens, rights and ages of open streams are looked at


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
    compression: str = "off"  # or "deflate": the body compressed for a client accepting it


@dataclass(frozen=True, slots=True)
class Credential:
    """Who opens a stream, and the key of the token its limits count against. `checked`:
    whether its token is looked at again while it is open (not where there are none: `--dev`)."""

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
        tally: StreamTally | None = None,
    ) -> None:
        self.number = number
        self.database = database
        self.credential = credential
        self.principal = credential.principal  # as the latest look at its token found it
        self.ends_at = ends_at  # time.monotonic() at which its max age is reached
        self.waker: Waker | None = None
        self.ended: str | None = None  # why it ended, one sentence
        self._last_id: str | None = None  # of the last event it took itself
        self._access = access
        self._named = named  # the tables it follows (keys), None: every table
        # Held by a take (a `where=` filter or a copy page: seconds at worst) and a join, never
        # by `end`: the sweep, the server's threads and the waiting room never wait for a take.
        self._lock = threading.Lock()
        self._end_lock = threading.Lock()  # `ended` is set once
        # The group that takes for it (guarded by the group's lock), and the group's count of
        # takes when it joined: its last id is the group's once the group took for it.
        self.group: StreamGroup | None = None
        self.joined_at = 0
        self.cursor = cursor(self.follows, self.view)
        self._tally = tally

    def follows(self, table: str) -> bool:
        """Whether the stream shows a table now: named (or any), and readable by its caller."""
        return _shows(self._access, self.database, self._named, self.principal, table)

    def view(self) -> tuple[frozenset[str] | None, Principal]:
        """Equal for streams that follow the same tables with the same rights now (the
        principal as the latest look at its token found it): they share what they take."""
        return (self._named, self.principal)

    @property
    def last_id(self) -> str | None:
        """The id of the last event taken for it (None: none yet)."""
        group = self.group
        if group is not None:
            return group.last_id_of(self)
        return self._last_id

    def take(self, budget: int) -> Taken:
        """The next events (see `EventCursor.take`); none once it has ended. A stream of a
        group leaves it first, at the group's place: it never takes from a stale one."""
        with self._lock:
            if self.ended is not None:
                return Taken([], False)
            group = self.group
            if group is not None:
                group.leave(self)
            after = stands_after(self.cursor)
            taken = self.cursor.take(budget)
            if taken.events:
                self._last_id = taken.events[-1].id
                if self._tally is not None:
                    self._tally.taken(taken.events, 1, after)
            return taken

    def join(self, group: StreamGroup) -> bool:
        """Into `group` (`StreamGroup.add`) while it goes on and its cursor is current; under
        its own lock, so that no take of its own runs meanwhile."""
        with self._lock:
            cursor = self.cursor
            current = isinstance(cursor, EventCursor) and cursor.current
            joined = self.ended is None and current and group.add(self)
        if joined and self.ended is not None:  # `end` may have left the group before the add
            group.leave(self)
            return False
        return joined

    def end(self, reason: str, reset: bool = False) -> None:
        """End the stream (its next `take` is empty; it leaves its group) and wake whoever
        sends it, never waiting for a take that runs. `reset`: the protocol layer ends it
        with a `reset` because its own work ran past the statement timeout (counted so)."""
        with self._end_lock:
            if self.ended is not None:
                return
            self.ended = reason
        if reset and self._tally is not None:
            self._tally.timed_out()
        self._leave_and_wake()

    def review(self, principal: Principal) -> None:
        """The principal as the latest look at its token found it. A stream whose view
        changed leaves its group, and is woken to take on its own."""
        if principal == self.principal:
            return
        self.principal = principal
        self._leave_and_wake()

    def _leave_and_wake(self) -> None:
        group = self.group
        if group is not None:
            group.leave(self)
        if self.waker is not None:
            self.waker.set()


class GroupSender(Protocol):
    """The protocol layer's sender of a group's parts: `fan_out` takes once for every
    member and sends them what was taken; True when more is ready already."""

    def fan_out(self) -> bool: ...


class StreamGroup:
    """Open streams of one database that follow the same tables with the same rights from
    one position (spec/stream.md, many streams): one take for all of them.

    The group has a cursor of its own. A member's own cursor stands still while it belongs,
    and is set to the group's place when it leaves (`OpenStream.take` leaves first), so
    whatever a member takes alone follows what the group took for it, once. What a caller
    may rely on: `take` gives the events and the members it took them for, at once; each of
    those must be sent them, and stands after them.

    `sender` is what the protocol layer sends the group's parts with (`GroupSender`).
    """

    def __init__(self, cursor: EventCursor, tally: StreamTally | None = None) -> None:
        self._lock = threading.Lock()
        self._cursor = cursor
        self._tally = tally
        self.members: tuple[OpenStream, ...] = ()  # replaced whole at each change
        self.last_id: str | None = None  # of the last event the group took
        self._takes = 0  # takes that gave events
        self.sender: GroupSender | None = None

    def take(self, budget: int) -> tuple[Taken, tuple[OpenStream, ...]]:
        """The next events of every member (see `EventCursor.take`), and the members."""
        with self._lock:
            after = self._cursor.position.after_lsn
            taken = self._cursor.take(budget)
            if taken.events:
                self.last_id = taken.events[-1].id
                self._takes += 1
                if self._tally is not None:
                    self._tally.taken(taken.events, len(self.members), after)
            return taken, self.members

    def last_id_of(self, member: OpenStream) -> str | None:
        with self._lock:
            if member.group is self and member.joined_at != self._takes:
                return self.last_id
            return member._last_id

    def add(self, stream: OpenStream) -> bool:
        """Take `stream` in (the caller holds the stream's lock): only where the group
        stands, or into an empty group, which then stands where the stream does."""
        cursor = stream.cursor
        with self._lock:
            if stream.group is self:
                return True
            if stream.group is not None or not isinstance(cursor, EventCursor):
                return False
            if self.members and cursor.position != self._cursor.position:
                return False
            if not self.members:
                self._cursor.position = cursor.position
            stream.group, stream.joined_at = self, self._takes
            self.members = (*self.members, stream)
            return True

    def leave(self, stream: OpenStream) -> None:
        """`stream` is taken for no more; it stands where the group stands."""
        with self._lock:
            if stream.group is not self:
                return
            assert isinstance(stream.cursor, EventCursor)
            stream.cursor.position = self._cursor.position
            if stream.joined_at != self._takes:
                stream._last_id = self.last_id
            stream.group = None
            self.members = tuple(m for m in self.members if m is not stream)


class EventStreams:
    """Open event streams of an instance: limits, fan-out at commits, and their ends.

    `wake_all` wakes many streams at once (the protocol layer's batch of pokes); by default
    each waker is set in turn. `clock` gives seconds since the epoch (commit times count so).
    `links` names the protocol layer's routes the streams' events and errors point to.
    """

    def __init__(
        self,
        instance: Instance,
        options: StreamOptions | None = None,
        wake_all: Callable[[list[Waker]], None] | None = None,
        clock: Callable[[], float] = time.time,
        links: Links = NO_LINKS,
    ) -> None:
        self.options = options or StreamOptions()
        self.tickets = TicketBook(self.options.ticket_ttl_s, clock, asked_at=links.tickets)
        self._links = links
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
        self._groups: dict[tuple[str, Hashable], StreamGroup] = {}  # by database key and view
        self._numbers = iter(range(1, 2**62))
        self._closed = False
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.counts = StreamCounts()  # read by `measures` for /metrics

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
            feed = StreamFeed.check(found, tables, feed_options, copy_from, self._links)
        acl = functools.partial(getattr, self._access, "version")  # the rights' version
        with self._lock:
            taken_over = self._take_over(credential, resume_id)
            self._check_limits(credential)
            recent = self._recent_of(name, found)
            number = next(self._numbers)

            def cursor(shows: Callable[[str], bool], view: Callable[[], Hashable]) -> Cursor:
                def plain(at: Position | None) -> EventCursor:
                    return EventCursor(recent, shows, options.replay_s, self._clock, at, view, acl)

                return plain(resume) if feed is None else feed.cursor(found, resume, plain)

            stream = OpenStream(
                number,
                name,
                credential,
                self._access,
                named,
                cursor,
                time.monotonic() + options.max_age_s,
                StreamTally(self.counts, name, recent),
            )
            self._open[number] = stream
            self._by_database.setdefault(name.lower(), []).append(stream)
            self._wakers.pop(name.lower(), None)
            self._start_sweeper()
        if taken_over is not None:
            # Ended once the lock is let go: ending wakes its sender, which may join groups.
            taken_over.end("a reconnect with this stream's last id took it over")
        return stream

    def join(
        self, stream: OpenStream, make_sender: Callable[[StreamGroup], GroupSender | None]
    ) -> StreamGroup | None:
        """Put a current stream into the group of the streams with its view at its place (a
        group is made when there is none): the group then takes for it (`StreamGroup`).
        None when it cannot share now: it has options, is not current, has ended, or the
        group of its view stands elsewhere. `make_sender(group)` gives a new group's sender.
        The caller must not hold the stream's lock."""
        cursor = stream.cursor
        if not isinstance(cursor, EventCursor) or stream.ended is not None:
            return None
        view = stream.view()
        key = (stream.database.lower(), view)
        with self._lock:
            group = self._groups.get(key)
            if group is None or not group.members:
                access, database = self._access, stream.database
                named, principal = view
                follows = functools.partial(_shows, access, database, named, principal)
                following = cursor.following(follows, lambda: view)
                tally = StreamTally(self.counts, database, cursor.recent)
                group = self._groups[key] = StreamGroup(following, tally)
                group.sender = make_sender(group)
        return group if stream.join(group) else None

    def close_stream(self, stream: OpenStream) -> None:
        """The stream's connection is done: it no longer counts."""
        stream.end("the stream was closed")
        with self._lock:
            self._forget(stream)

    def open_count(self) -> int:
        """Streams open now (a gauge for metrics)."""
        with self._lock:
            return len(self._open)

    def measures(self) -> StreamMeasures:
        """The streams open now by database, and the events and resets sent so far."""
        with self._lock:
            by_database = {s[0].database: len(s) for s in self._by_database.values() if s}
        return self.counts.snapshot(by_database)

    def close(self) -> None:
        """Shutting down: no stream opens any more (503); the open ones are ended by their
        protocol layer, after their last durable event."""
        with self._lock:
            self._closed = True
        self._stop.set()

    def _take_over(self, credential: Credential, resume_id: str | None) -> OpenStream | None:
        """A reconnect over a limit with the last id of an open stream of its token ends
        that stream (the caller ends what this gives): its client is gone (a half-open
        connection) or this is that client."""
        if resume_id is None or not self._over_limit(credential):
            return None
        for stream in self._open.values():
            if (
                stream.credential.token_key == credential.token_key
                and stream.ended is None
                and stream.last_id == resume_id
            ):
                self._forget(stream)
                return stream
        return None

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
            self._recent[key] = RecentTransactions(found, name, links=self._links)
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
        token and each of its databases, however many streams they hold)."""
        with self._lock:
            streams = [s for s in self._open.values() if s.ended is None]
        now = time.monotonic()
        # By token key and database: its principal now, and why its streams end (None: on).
        verdicts: dict[tuple[str, str], tuple[Principal | None, str | None]] = {}
        for stream in streams:
            key = (stream.credential.token_key, stream.database)
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = verdicts[key] = self._verdict(stream.credential, stream.database)
            principal, reason = verdict
            if reason is not None:
                stream.end(reason)
            elif now >= stream.ends_at:
                stream.end(f"the stream reached its most age ({self.options.max_age_s:g} s)")
            else:
                assert principal is not None
                stream.review(principal)
        with self._lock:  # groups whose streams all left are forgotten
            self._groups = {k: g for k, g in self._groups.items() if g.members}

    def _verdict(
        self, credential: Credential, database: str
    ) -> tuple[Principal | None, str | None]:
        """Who a token stands for now, and why its streams of `database` end (None: on)."""
        principal = credential.principal
        if credential.checked:
            try:
                principal = self._access.principal_of_token_key(credential.token_key)
            except KdbError:
                return None, "the token expired or was dropped"
        if not self._instance.has_database(database):
            return principal, f"database '{database}' was dropped"
        if not self._holds_any(principal, database):
            return principal, f"the right to database '{database}' was revoked"
        return principal, None

    def _holds_any(self, principal: Principal, database: str) -> bool:
        try:
            self._access.check_any(principal, database)
        except KdbError:
            return False
        return True

    # -- rows by key ------------------------------------------------------------------------

    def read_row(self, principal: Principal, database: str, table: str, key: str) -> RowAnswer:
        """The row with `key` (hex, as events carry it) as it is now; 404 once it is gone."""
        return stream_rows.read_row(self._instance, principal, database, table, key)


def _shows(
    access: AccessControl,
    database: str,
    named: frozenset[str] | None,
    principal: Principal,
    table: str,
) -> bool:
    """Whether a stream of `principal` that follows `named` (None: every table) shows
    `table` now: named (or any), and readable by its caller."""
    if named is not None and table not in named:
        return False
    return access.allowed(principal, database, Right.READ, table)


def _wake_each(wakers: list[Waker]) -> None:
    for waker in wakers:
        waker.set()
