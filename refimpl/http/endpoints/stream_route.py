"""GET /stream/changes: the event stream, one long-lived answer of server-sent events.

The engine (`refimpl.engine.event_streams`) decides which events come and when the stream
ends; this module checks the request, parks the stream once in the waiting room and turns
the engine's events into SSE bytes. A stream holds no worker thread: the room's thread
sends its parts when a commit pokes it, a heartbeat at each deadline, and its end.

Flow control: a stream makes its next part only once the server has sent the previous one
(`Parked.drained`), at most `stream_buffer_kb` of events at a time, so a client that stops
reading costs one part of memory; the rest stays in the log until it reads again.

Compression (`stream_compression = deflate`, off by default): a plain stream whose client
accepts `deflate` is sent compressed (`stream_deflate`): each part its own segment, the
shared part compressed once for all.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence

from refimpl.engine.event_streams import EventStreams, OpenStream, StreamGroup
from refimpl.engine.features.event_cursor import (
    CHANGE,
    READY,
    Event,
    Position,
    Taken,
    parse_event_id,
)
from refimpl.engine.features.initial_copy import CopyPosition, parse_position
from refimpl.engine.tracking.signals import Waker
from refimpl.errors import BadRequest, StatementTimeout
from refimpl.http.context import Context
from refimpl.http.encode import Answer
from refimpl.http.endpoints.feed_args import feed_options
from refimpl.http.endpoints.stream_credentials import request_credential
from refimpl.http.endpoints.stream_deflate import (
    HEAD,
    Checksum,
    Piece,
    accepts_deflate,
    add_to_each,
    piece,
)
from refimpl.http.endpoints.stream_states import SendEvent, SendState, move
from refimpl.waiting.fanout import FANOUT_STRIDE
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import WaitingRoom

RETRY_MS = 1000
HEADERS = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-store"),
    ("X-Accel-Buffering", "no"),
)
# With `stream_compression = deflate` every answer says that its encoding depends on the
# request's Accept-Encoding, and a compressed one says how it is encoded.
VARY = (("Vary", "Accept-Encoding"),)
DEFLATED = (("Content-Encoding", "deflate"),)
HEARTBEAT = b": heartbeat\n\n"
_CHANGE_BLOCK = b"id: %b\nevent: change\ndata: %b\n\n"
HEARTBEAT_PIECE = piece(HEARTBEAT)
_SENDING = (SendState.SENDING, SendState.SENDING_MORE)  # a part is in flight
_BUSY = (*_SENDING, SendState.TAKING, SendState.TAKING_MORE)  # a part in flight, or a take


def encode_events(events: Sequence[Event]) -> bytes:
    """SSE blocks: `id`, `event` and one `data` line each; `retry` with each `ready`."""
    blocks: list[bytes] = []
    add = blocks.append
    for event_id, kind, data, _ in events:
        if kind == CHANGE and event_id:
            # Most blocks a stream sends (a group's part carries a round's commits): one
            # format, a C call (the event's id is ASCII digits and dots).
            add(_CHANGE_BLOCK % (event_id.encode(), data))
            continue
        retry = f"retry: {RETRY_MS}\n" if kind == READY else ""
        # An event without an id (a state, a change inside a transaction of an initial copy)
        # leaves the client's last id as it was.
        head = f"id: {event_id}\n" if event_id else ""
        add(f"{retry}{head}event: {kind}\ndata: ".encode() + data + b"\n\n")
    return b"".join(blocks)


class _Encoded:
    """What a `Taken`'s events are sent as, made once for every stream that took the same
    (the engine shares a `Taken` among streams at one position with one view): their SSE
    bytes, and the parts made of them, plain and compressed, each made when first asked."""

    __slots__ = ("data", "plain", "deflated")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.plain: Part[Answer] | None = None
        self.deflated: tuple[Part[Answer], Piece] | None = None


def _encoded(taken: Taken) -> _Encoded:
    # Two threads that make it at once make the same bytes: one of them is kept.
    if taken.encoded is None:
        taken.encoded = _Encoded(encode_events(taken.events))
    encoded: _Encoded = taken.encoded
    return encoded


def _part_of(taken: Taken) -> Part[Answer]:
    """The part that sends what a stream took: one Answer whose chunk the server frames once
    for all the streams that took the same."""
    encoded = _encoded(taken)
    if encoded.plain is None:
        encoded.plain = Part(_body(encoded.data))
    return encoded.plain


def _deflated_of(taken: Taken) -> tuple[Part[Answer], Piece]:
    """`_part_of` for a compressed stream, and what its checksum adds of it."""
    encoded = _encoded(taken)
    if encoded.deflated is None:
        made = piece(encoded.data)
        encoded.deflated = (Part(_body(made.body)), made)
    return encoded.deflated


def _body(data: bytes) -> Answer:
    """A later part of the stream: only its bytes count (the head went with the first)."""
    answer = Answer(data, 200, "text/event-stream")
    answer.headers = []
    return answer


class _GroupParts:
    """Sends the parts of a group of streams (`StreamGroup`: one position, one view) as one:
    one take, one encoding and one bytes object for all of them, one send() a socket
    (`WaitingRoom.send_shared`). A `Batch`: the room's fan-out round runs it once for all
    the members it poked. A member whose client does not take a part whole leaves the group
    (`_Sender.backlogged`) and goes on alone."""

    def __init__(self, group: StreamGroup, room: WaitingRoom, budget: int) -> None:
        self._group = group
        self._room = room
        self._budget = budget
        self._members: tuple[OpenStream, ...] = ()
        # Of the members, in their order: those sent plain parts, those sent compressed ones
        # (and their checksums, which each compressed part adds to).
        self._outlets: list[object] = []
        self._deflated_outlets: list[object] = []
        self._checksums: list[Checksum] = []
        # By their outlet: an opaque handle of the deliverer, hashed by identity.
        self._senders: dict[object, _Sender] = {}
        self._rounds = 0  # where the next round starts (none is always the last)

    def fan_out(self) -> bool:
        taken, members = self._group.take(self._budget)
        if not taken.events or not members:
            return taken.more
        if members is not self._members:
            senders = [m.waker for m in members if isinstance(m.waker, _Sender)]
            self._outlets = [s.outlet for s in senders if s.checksum is None]
            self._deflated_outlets = [s.outlet for s in senders if s.checksum is not None]
            self._checksums = [s.checksum for s in senders if s.checksum is not None]
            self._senders = {s.outlet: s for s in senders}
            self._members = members
        stride = self._rounds * FANOUT_STRIDE
        self._rounds += 1
        if self._outlets:
            self._send(self._outlets, stride, _part_of(taken))
        if self._checksums:
            part, made = _deflated_of(taken)
            # In the order its parts go out: every part of a member is made on the room's
            # thread (a plain stream's attempts and heartbeats, and this).
            add_to_each(self._checksums, made)
            self._send(self._deflated_outlets, stride, part)
        return taken.more

    def _send(self, outlets: list[object], stride: float, part: Part[Answer]) -> None:
        first = int(stride * len(outlets)) % len(outlets)
        self._room.send_shared(
            itertools.chain(outlets[first:], outlets[:first]), part.answer, self._backlogged
        )

    def _backlogged(self, outlet: object) -> None:
        self._senders[outlet].backlogged()


class _StreamPokes:
    """The engine's batch waker: pokes the parked streams of a list of wakers. The engine
    hands the same list at each commit until a stream opens or closes, so what is poked is
    derived once per list, and the room counts a list poked by several commits once."""

    KEPT = 64  # lists remembered (one per database with streams, in practice)

    def __init__(self, room: WaitingRoom) -> None:
        self._room = room
        self._derived: dict[int, tuple[list[Waker], list[Parked[Answer]]]] = {}

    def __call__(self, wakers: list[Waker]) -> None:
        found = self._derived.get(id(wakers))
        if found is None or found[0] is not wakers:
            if len(self._derived) >= self.KEPT:
                self._derived.clear()
            parked = [w.parked for w in wakers if isinstance(w, _Sender) and w.parked]
            found = self._derived[id(wakers)] = (wakers, parked)
        self._room.poke_all(found[1])


def poke_streams(room: WaitingRoom) -> Callable[[list[Waker]], None]:
    """What the engine calls with the wakers of a database's streams at each commit."""
    return _StreamPokes(room)


class _Sender:
    """Makes one stream's parts: one at a time, the next once the last one was sent. The
    engine's waker of its stream.

    A plain stream whose part was sent and that has nothing more to take joins its group
    (`_GroupParts` sends its parts then); it leaves it when it takes alone, when its client
    did not take a part whole, and when the engine takes it out (it ended, or its view
    changed), which wakes it (`set`). Where it stands (a take running, a part in flight,
    woken meanwhile, a squash hold) is one `SendState`, moved along
    `stream_states.TRANSITIONS` only. Its `_lock` orders these moves and is held for them
    only, never during a take: a take (its owner's `where=` filter or copy page, seconds at
    worst) runs in the state `TAKING`, and what comes meanwhile from the room's thread (a
    heartbeat sent, a wake-up, its group's part) is recorded by a move that the take's end
    acts on, so the room's thread never waits for a take."""

    def __init__(
        self,
        stream: OpenStream,
        streams: EventStreams,
        room: WaitingRoom,
        hold_s: float = 0.0,
        deflate: bool = False,
        vary: bool = False,
    ) -> None:
        self.stream = stream
        self.streams = streams
        self.room = room
        self.budget = streams.options.buffer_kb * 1024
        self.heartbeat_s = streams.options.heartbeat_s
        self.parked: Parked[Answer] | None = None
        self._lock = threading.Lock()
        self._state = SendState.IDLE  # moved by `_move` only, under `_lock`
        # squash=<seconds>: a part with changes comes at most once per `hold_s`; the room
        # looks at the stream every `_tick` (its deadline) to send what was held.
        self.hold_s = hold_s
        self._tick = min(self.heartbeat_s, max(hold_s / 5, 0.05)) if hold_s else 0.0
        self._held_until = 0.0
        self._heartbeat_at = time.monotonic() + self.heartbeat_s
        # Its takes are its user's work (filters, copy pages), made on the room's pool:
        # at shutdown it sends none more from the room's thread.
        self.offloaded = False
        # `deflate`: its parts go out compressed (`stream_deflate`), and this is the running
        # checksum of what it was sent; None: plain.
        self.checksum = Checksum() if deflate else None
        # `vary`: the server compresses for clients that accept it, which every answer says.
        self._headers = (*HEADERS, *VARY) if vary else HEADERS

    @property
    def outlet(self) -> object:
        return None if self.parked is None else self.parked.outlet

    def set(self) -> None:
        """Wake the stream alone (the engine: it ended, or it left its group by itself)."""
        with self._lock:
            self._detach()
        if self.parked is not None:
            self.room.poke(self.parked)

    def first_deadline(self) -> float:
        return time.monotonic() + (self._tick or self.heartbeat_s)

    def first(self) -> Part[Answer]:
        """The head and the first events (`ready`, or what a resume missed)."""
        with self._lock:
            self._move(SendEvent.TAKE)
        taken = self._take()
        data = encode_events(taken.events)
        if self.checksum is None:
            answer = Answer(data, 200)
            answer.headers = list(self._headers)
        else:
            made = piece(data)
            self.checksum.add(made)
            answer = Answer(HEAD + made.body, 200)
            answer.headers = [*self._headers, *DEFLATED]
        return Part(answer)

    def attempt(self, _: int) -> Answer | Part[Answer] | None:
        try:
            return self._attempt()
        except StatementTimeout as error:
            return self._timed_out(error)

    def _attempt(self) -> Answer | Part[Answer] | None:
        if self.stream.ended is not None:
            return self._end()
        with self._lock:
            if self._state in _BUSY:
                self._move(SendEvent.WOKEN)  # it takes again once the part or take is done
                return None
            if self.hold_s and time.monotonic() < self._held_until:
                self._move(SendEvent.WOKEN_IN_HOLD)
                return None
            self._detach()  # taken alone: its take leaves the group
            self._move(SendEvent.TAKE)
        taken = self._take(join=True)
        if self.stream.ended is not None:
            return self._end()
        if not taken.events:
            return None
        if self.checksum is None:
            return _part_of(taken)
        part, made = _deflated_of(taken)
        self.checksum.add(made)
        return part

    def _take(self, join: bool = False) -> Taken:
        """The stream's next events, taken in the state `TAKING` (the caller moved it there)
        without the lock: a heartbeat, a wake-up or a part sent meanwhile only moves the
        state. `join`: having taken nothing, the stream goes back into its group (no part,
        so no `drained` will). Woken during a take that found nothing, it is poked again:
        the commit that woke it may have come after the take looked."""
        try:
            taken = self.stream.take(self.budget)
        except BaseException:
            with self._lock:
                self._move(SendEvent.TAKE_FAILED)
            raise
        with self._lock:
            woken = self._state is SendState.TAKING_MORE
            if not taken.events:
                self._move(SendEvent.TOOK_NOTHING)
                if join:
                    self._join()
            else:
                self._move(SendEvent.TOOK_PART_MORE if taken.more else SendEvent.TOOK_PART)
            if self.hold_s and taken.events:
                self._held_until = time.monotonic() + self.hold_s
        if woken and not taken.events and self.parked is not None:
            self.room.poke(self.parked)
        return taken

    def drained(self) -> None:
        with self._lock:
            if self._state is SendState.TAKING or self._state is SendState.TAKING_MORE:
                # A heartbeat sent during a take: nothing of its own was in flight, and the
                # take's end decides what comes next.
                self._move(SendEvent.DRAINED)
                return
            again = self._state is SendState.SENDING_MORE
            self._move(SendEvent.DRAINED)
            # A stream its group does not take in (the group stands elsewhere) takes once
            # more alone: what became durable meanwhile does not wait for the next commit.
            again = again or not self._join()
        if again and self.parked is not None:
            self.room.poke(self.parked)

    def backlogged(self) -> None:
        """Its client did not take its group's part whole (the server holds the rest, and
        tells `drained` when it is sent): it goes on alone."""
        with self._lock:
            # The group's part may have stopped at the budget: it takes on once it is sent.
            self._move(SendEvent.BACKLOGGED)
            self._detach()
            group = self.stream.group
            if group is not None:
                group.leave(self.stream)

    def _join(self) -> bool:
        """Into the stream's group, where it can share (the caller holds the lock); True
        when it is in, or never shares (options, a hold, no shared sends)."""
        parked = self.parked
        if self.hold_s or parked is None or parked.outlet is None or not self.room.sends_shared:
            return True
        group = self.streams.join(self.stream, self._group_parts)
        parked.batch = None if group is None else group.sender
        return group is not None

    def _group_parts(self, group: StreamGroup) -> _GroupParts:
        return _GroupParts(group, self.room, self.budget)

    def _detach(self) -> None:
        """Its parts are no longer the group's to send (the caller holds the lock)."""
        if self.parked is not None:
            self.parked.batch = None

    def heartbeat(self) -> Part[Answer] | Answer | None:
        if self.stream.ended is not None:
            return self._end()
        assert self.parked is not None
        now = time.monotonic()
        if self._tick:
            # The deadline moves on before anything is made (the room reschedules on it).
            self.parked.deadline = now + self._tick
            with self._lock:
                due = self._state is SendState.HELD and now >= self._held_until
            if due:
                return self.parked.attempt(0)  # offloaded like every attempt of its own
            if now < self._heartbeat_at:
                return None
        else:
            self.parked.deadline = now + self.heartbeat_s
        self._heartbeat_at = now + self.heartbeat_s
        if self.checksum is None:
            return Part(_body(HEARTBEAT))
        self.checksum.add(HEARTBEAT_PIECE)
        return Part(_body(HEARTBEAT_PIECE.body))

    def closing(self) -> Answer:
        """At shutdown: what is durable and fits (never half an event), then the end."""
        with self._lock:
            busy = self._state in _BUSY or self.offloaded
            if not busy:
                self._move(SendEvent.TAKE)
        events = [] if busy else self._take().events
        self.stream.end("the server is shutting down")
        return self._last(encode_events(events) + self._end_text())

    def _timed_out(self, error: StatementTimeout) -> Answer:
        """Its own work (a filter, a copy page) ran past the statement timeout: the stream
        ends with a `reset` (data `{}`, as always) after a comment saying why; the client
        reads again, or asks for less."""
        reason = f"where= or the initial copy ran too long: {error}"
        self.stream.end(reason, reset=True)
        reset = f": {reason}\n\nevent: reset\ndata: {{}}\n\n".encode()
        return self._last(reset + self._end_text())

    def _move(self, event: SendEvent) -> None:
        """Along the table of `stream_states` (the caller holds the lock)."""
        self._state = move(self._state, event)

    def _end(self) -> Answer:
        """The last part: a comment saying why (an EventSource ignores it)."""
        return self._last(self._end_text())

    def _end_text(self) -> bytes:
        reason = (self.stream.ended or "").replace("\n", " ")
        return f": the stream ended: {reason}\n\n".encode()

    def _last(self, data: bytes) -> Answer:
        """The stream's last part, of `data`: compressed, it ends the zlib stream."""
        return _body(data if self.checksum is None else self.checksum.last(data))


def stream_route(ctx: Context) -> Parked[Answer]:
    args = ctx.args
    tables = ctx.request.args.getlist("table")
    for table in tables:
        if not table.strip():
            raise BadRequest("the parameter 'table' names a table; leave it out to follow all")
    options = feed_options(ctx)
    resume_text = (
        ctx.request.headers.get("Last-Event-ID") or args.get("last-event-id") or args.get("from")
    )
    resume: Position | None = None
    copy_from: CopyPosition | None = None
    if resume_text is not None and resume_text.strip():
        resume_text = resume_text.strip()
        if options.initial and ":" in resume_text:  # a place inside the copy
            found = parse_position(resume_text, "Last-Event-ID")
            assert isinstance(found, CopyPosition)
            copy_from = found
        else:
            resume = parse_event_id(resume_text, "Last-Event-ID")
    else:
        resume_text = None
    credential = request_credential(ctx, args.get("ticket"))
    streams = ctx.app.streams
    stream = streams.open(credential, ctx.database, tables, resume, resume_text, options, copy_from)
    room = ctx.app.waiting_room
    # Compressed only where the server is set to (`stream_compression`), and where every
    # part is made on the room's thread, in the order it goes out (a plain stream): its
    # checksum follows that order. Off, the body is as it is whatever the client accepts.
    compressing = streams.options.compression == "deflate"
    deflate = (
        compressing
        and options.plain
        and accepts_deflate(ctx.request.headers.get("Accept-Encoding"))
    )
    sender = _Sender(stream, streams, room, options.squash_seconds, deflate, compressing)
    # Filters and copy pages are work of the client's choosing: on its owner's share of the
    # room's pool, within the statement timeout, never on the room's thread.
    budget = ctx.app.feeds.work_budget
    offloaded = None
    if not options.plain:
        offloaded = room.offload(stream.principal.name, budget, sender.attempt)
        sender.offloaded = True
    parked: Parked[Answer] = Parked(
        None,
        0,
        offloaded or sender.attempt,
        sender.heartbeat,
        sender.first_deadline(),
        lambda: streams.close_stream(stream),
        kind=Kind.STREAM,
        at_close=sender.closing,
        on_drained=sender.drained,
    )
    sender.parked = parked
    if offloaded is not None:
        offloaded.bind(parked)
    stream.waker = sender
    try:
        # The fan-out waits only while this database's writers queue for their commits.
        with ctx.session(stream.principal) as session:
            room.watch_writers(session.database.log)
        with budget():
            first = sender.first()
    except BaseException:
        streams.close_stream(stream)
        raise
    parked.decide(first)
    room.park(parked)
    room.poke(parked)  # a commit between the first read and the park is not missed
    return parked
