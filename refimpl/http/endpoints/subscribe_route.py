"""GET /api/subscribe: a live query as server-sent events.

The first request answers a `snapshot` at once; asked again with its id (`Last-Event-ID`
or `&id=`), a request waits for a commit that changes the answer and sends `rows`. With
nothing changed before `wait` ends, the answer is only the id to ask again with. With
`offsets=true` (an ordered, limited query) each `rows` answer also holds its `moves`.

A waiting request is parked in the waiting room, which answers it at its deadline (or, when
a re-run is queued or under way then, that re-run does, its timeout's 400 included); a commit
that touches its query puts it in its user's `Woken` batch (as it does a stream of
`subscribe_stream`), which runs the query again on the user's share of the room's pool and
hands the answer to the server itself: one job a commit for all of a user's woken requests,
none of them through the room's thread.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import NamedTuple, Protocol

from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.features.top_n import Move
from refimpl.engine.result import Column
from refimpl.engine.session import Session
from refimpl.engine.storage import values
from refimpl.http.context import Context
from refimpl.http.encode import Answer, encode_json
from refimpl.http.endpoints.change_encoding import RETRY_MS
from refimpl.http.endpoints.changes_route import DEFAULT_WAIT_SSE_MS, MAX_WAIT_MS
from refimpl.http.endpoints.feed_args import flag
from refimpl.http.error_answers import to_response
from refimpl.http.route_memo import MEMO_KEY, Routed, RouteMemo
from refimpl.waiting.owners import Budget
from refimpl.waiting.parked import LIVE, Parked
from refimpl.waiting.places import place_owner
from refimpl.waiting.room import WaitingRoom

log = logging.getLogger("refimpl.subscribe")


def _row(columns: list[Column], row: tuple) -> list[object]:
    return [values.to_json(v, c.type) for c, v in zip(columns, row, strict=True)]


def _key(columns: list[Column], reply: Reply, key: tuple) -> list[object]:
    subscription = reply.subscription
    if subscription.whole_row:
        return _row(columns, key)
    types = {c.name: c.type for c in columns}
    return [values.to_json(v, types[n]) for n, v in zip(subscription.key_columns, key, strict=True)]


def _move(columns: list[Column], move: Move) -> dict[str, object]:
    return {
        "old_offset": move.old_offset,
        "new_offset": move.new_offset,
        "row": _row(columns, move.row),
    }


_RETRY_BLOCK = f"retry: {RETRY_MS}\n\n".encode()


def encode_reply(reply: Reply) -> bytes:
    """A long poll's answer: the `retry` block, then `reply_event`."""
    if reply.kind == "rows":  # most: one piece, its shared event copied once
        event = reply.change.encoded.get("sse") or rows_event(reply)
        return b"%sid: %s.%d\n%s" % (
            _RETRY_BLOCK,
            reply.subscription.id.encode(),
            reply.version,
            event,
        )
    return _RETRY_BLOCK + reply_event(reply)


def reply_event(reply: Reply) -> bytes:
    """The `id:` line and the event of one answer (a stream's part, or a long poll's after
    its `retry`)."""
    head = b"id: " + reply.id.encode() + b"\n"
    if reply.kind == "none":
        return head + b"\n"
    if reply.kind == "rows":
        return head + rows_event(reply)
    return head + _event(reply)


def rows_event(reply: Reply) -> bytes:
    """The event of a `rows` answer after its `id:` line. One change is shared by every
    subscription that had the same two answers: its event is encoded once, for the first
    of them, and is the same bytes object for all."""
    encoded = reply.change.encoded
    event = encoded.get("sse")
    if event is None:
        event = encoded["sse"] = _event(reply)
    return event


def _event(reply: Reply) -> bytes:
    """The `event:` and `data:` lines of a snapshot or rows answer (the same for every
    subscription of the query that had the same answers)."""
    subscription = reply.subscription
    columns = subscription.columns
    described = [{"name": c.name, "type": c.type} for c in columns]
    if reply.kind == "snapshot":
        symbol = subscription.symbol
        body = {
            "table": subscription.select.source.name,  # type: ignore[union-attr]
            "symbol": None if symbol is None else values.to_json(symbol, "STRING"),
            "columns": described,
            "key": None if subscription.whole_row else subscription.key_columns,
            "maintained": subscription.maintained,
            "rows": [_row(columns, r) for r in reply.rows],
        }
    else:
        body = {
            "columns": described,
            "rows": [_row(columns, r) for r in reply.rows],
            "removed": len(reply.removed_keys),
            "removed_keys": [_key(columns, reply, k) for k in reply.removed_keys],
        }
        if reply.moves is not None:
            body["moves"] = [_move(columns, m) for m in reply.moves]
    return b"event: " + reply.kind.encode() + b"\ndata: " + encode_json(body) + b"\n\n"


SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


# What a woken live query's `make` gives: the hand-over of what it made (what the call
# returns is not used).
HandOver = Callable[[], object]


class Headed(NamedTuple):
    """What a woken stream's `make` gives for a part that others may end alike: `head`
    (its own `id:` line) then `body` (a `rows_event`, one bytes object for all the streams
    that share it), to the client of `outlet` (its `Parked.outlet`). The streams of a pass
    whose parts share a body are sent it at once (`WaitingRoom.send_headed`); those after
    it that take its step are made at once by `takes_after`, if given."""

    outlet: object
    head: bytes
    body: bytes
    takes_after: TakesAfter | None = None


class TakesAfter(Protocol):
    """The parts of `woken[at]` and those in a row after it that take the step a stream's
    part took (`_LiveStream.take_after`): their `made` entries, their one body, each one's
    (outlet, head); they end before the first that does not, which is made as usual."""

    def __call__(self, woken: list[Runs], at: int) -> tuple[list[Made], bytes, _Sends]: ...


class Runs(Protocol):
    """What a user's batch of woken live queries runs (`Woken`)."""

    def make(self) -> HandOver | Headed | None:
        """Make the answer or part (the query's work), not yet handed over; the call that
        hands it over, or None when there is nothing to hand over now."""
        ...


# A woken live query made in a pass (`Woken._make_all`): it, what its `make` gave, and the
# database whose commits that shows before they may be durable (`PassReads.shown`), if any.
Made = tuple[Runs, "HandOver | Headed", object]
_Sends = list[tuple[object, bytes]]  # (outlet, head) of parts that share one body
# Headed parts by their body: each body's streams are sent it at once.
_Shared = dict[bytes, _Sends]


class Woken:
    """The live queries of one user (long polls and streams) that commits woke, waiting for
    their answers or parts to be made: one job on the user's share of the room's pool makes
    them all, one after another, then hands them over, one after another (a commit waking a
    hundred of them hands one job over, not a hundred, and never goes through the room's
    thread). Every answer is made before the first is sent: a send wakes its client, whose
    process may take the processor, and other threads may take the interpreter lock, so
    sends among the making made the job lose both at nearly every answer (with 10 woken
    long polls, its thread ran 9.5 times a commit), each time coming back to cold caches.
    Those woken while it runs are made by its next job, queued behind the user's other work
    on the pool: were it to make them too, commits that keep coming would keep it running,
    and that work (a `where=` filter, a copy's page) and the answered connections' next
    requests (`WaitingRoom.after_round`) would wait for the commits to stop."""

    def __init__(self, room: WaitingRoom, owner: Hashable) -> None:
        self._room = room
        self._owner = owner
        self._lock = threading.Lock()
        self._woken: list[Runs] = []
        self._running = False
        # The reads of the pass under way, a new one each pass: its streams read the
        # revision counters and the access records once for all (`PassReads`).
        self.reads = PassReads()

    def add(self, woken: Runs) -> None:
        """`woken.make()` is called soon, on the user's share, and what it gives after the
        others of its pass are made (cheap, never blocks)."""
        with self._lock:
            self._woken.append(woken)
            if self._running:
                return
            self._running = True
        self._room.owner_work.submit(self._owner, self._run)

    def _run(self) -> None:
        # One round of answers: the connections they answered are watched for their next
        # requests once all are handed over (`WaitingRoom.after_round`), so that a client's
        # next request does not take the interpreter away from the answers still to make.
        # Those whose client asked again meanwhile are answered by this thread then
        # (`answers_next`, read by the server as it sends an answer): the re-poll parks
        # at once, at a fraction of a worker's wake-up and the connection's arming.
        state = self._room.round_state
        if getattr(state, "pending", None) is not None:
            self._run_all()  # within a round already: its end runs them
            return
        pending: list[Callable[[], None]] = []
        state.pending, state.answers_next = pending, True
        try:
            self._run_all()
        finally:
            state.answers_next = None
            # What the actions leave for later (a second look at a connection whose next
            # request had not come yet) runs once they have all run, and so on.
            try:
                while pending:
                    actions = pending
                    state.pending = pending = []
                    for action in actions:
                        try:
                            action()
                        except Exception:  # one connection's trouble must not keep others'
                            log.warning("finishing an answered request failed", exc_info=True)
            finally:  # whatever ends them: the thread's next round is a round of its own
                state.pending = None

    def _make_all(
        self, woken: list[Runs], made: list[Made], hand_overs: list[HandOver], shared: _Shared
    ) -> None:
        """Make each of `woken`: (it, its hand-over or headed part, the database whose
        commits it shows before they may be durable) in `made`, and its hand-over in
        `hand_overs` or its headed part in `shared` (by its body)."""
        reads = self.reads
        keep = made.append
        at, count = 0, len(woken)
        while at < count:
            each = woken[at]
            at += 1
            reads.shown = None
            try:
                hand_over = each.make()
            except Exception:
                # One query's failure costs it only: the others of this pass are made
                # all the same.
                log.warning("making a live query's answer failed", exc_info=True)
                continue
            if hand_over is None:
                continue
            keep((each, hand_over, reads.shown))
            # `_gather`'s, in line: gathered as made, not in a second loop over the parts.
            if type(hand_over) is not Headed:
                hand_overs.append(hand_over)  # type: ignore[arg-type]  # not Headed
                continue
            sharing = shared.get(hand_over.body)
            if sharing is None:
                sharing = shared[hand_over.body] = []
            sharing.append((hand_over.outlet, hand_over.head))
            takes_after = hand_over.takes_after
            if takes_after is None or at == count:
                continue
            # Those after it that take its step (a hundred streams of one query woken by one
            # commit): made in one call, with one body; the first that does not, as usual.
            reads.shown = None
            try:
                taken, body, sends = takes_after(woken, at)
            except Exception:
                log.warning("making live queries' parts failed", exc_info=True)
                continue
            if taken:
                at += len(taken)
                made += taken  # its entries as `takes_after` made them, in its one loop
                sharing = shared.setdefault(body, [])
                sharing += sends

    @staticmethod
    def _gather(made: list[Made], hand_overs: list[HandOver], shared: _Shared) -> None:
        """Each hand-over of `made` in `hand_overs`, each headed part in `shared` (by its
        body), as `_make_all` gathers them."""
        for _, hand_over, _ in made:
            if isinstance(hand_over, Headed):
                shared.setdefault(hand_over.body, []).append((hand_over.outlet, hand_over.head))
            else:
                hand_overs.append(hand_over)

    def _settled(self, made: list[Made], hand_overs: list[HandOver], shared: _Shared) -> None:
        """Once the commits the parts of `made` show are durable (made while their flush ran:
        none is sent before it has ended). When a database's log failed instead, its parts
        are made again, and answer the failure (`PassReads.settle`), and `hand_overs` and
        `shared` are gathered again: the others' parts, as made (made again, a well query
        would find its counter read and answer nothing: its change lost to that client),
        then the failed ones'. Only then is anything of the pass gathered a second time."""
        failed = self.reads.settle()
        if not failed:
            return
        hand_overs.clear()
        shared.clear()
        self._gather([one for one in made if one[2] not in failed], hand_overs, shared)
        remade = [each for each, _, shown in made if shown in failed]
        self._make_all(remade, [], hand_overs, shared)

    def _run_all(self) -> None:
        """One pass: those woken so far, all made, then all handed over; a job for the next
        pass when more came meanwhile."""
        with self._lock:
            woken, self._woken = self._woken, []
        hand_overs: list[HandOver] = []
        made: list[Made] = []
        shared: _Shared = {}
        try:
            try:
                # What the pass counted is counted before its parts are sent.
                with PassReads() as self.reads:
                    self._make_all(woken, made, hand_overs, shared)
            finally:
                self._settled(made, hand_overs, shared)
                for body, parts in shared.items():
                    try:
                        self._room.send_headed(parts, body)
                    except Exception:  # a bug: the other bodies and hand-overs go on
                        log.warning("sending live queries' parts failed", exc_info=True)
                # Even past an error that ends the pass: a long poll whose answer was made
                # counts as running until it is handed over, and its deadline waits for it.
                for hand_over in hand_overs:
                    try:
                        hand_over()
                    except Exception:  # a stream's part handed over after its end: its own
                        log.warning("handing over a live query's answer failed", exc_info=True)
                # The pass's bookkeeping that no part waits for, after every send.
                self.reads.touch_asked()
        finally:
            with self._lock:
                again = self._running = bool(self._woken)
            if again:
                self._room.owner_work.submit(self._owner, self._run)


def woken(room: WaitingRoom, owner: Hashable) -> Woken:
    """The batch of `owner`'s woken live queries in `room` (one a user, kept by the room's
    pool: `OwnerPool.batches`)."""
    batches = room.owner_work.batches
    batch = batches.get(owner)
    if batch is None:  # of two made at once, both callers take the one kept
        batch = batches.setdefault(owner, Woken(room, owner))
    return batch


class _Poll:
    """A parked long poll of a live query, woken from the engine's wake board (`set`: cheap,
    never blocks): its user's batch (`Woken`) runs its query again within its budget and
    hands the answer to the server itself. A wake-up that comes before the request is
    parked is kept and handed on at `attach`. A deadline that comes while a re-run is queued
    or running, or made and not yet handed over, waits for it (`at_deadline`), so that its
    answer, or its statement timeout's 400, is what the client gets, as the spec says."""

    # Its state's start, as the class's defaults (a long poll's every re-poll makes one).
    _parked: Parked[Answer] | None = None
    _missed = False  # woken before it was parked
    _queued = False  # in its batch, not yet run
    _running = False  # its re-run is under way, or its answer not yet handed over
    _expired = False  # its deadline came while a re-run was queued or running

    def __init__(self, step: LiveWait, batch: Woken, budget: Budget) -> None:
        self._step = step
        self._batch = batch
        self._budget = budget
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            if self._parked is None:
                self._missed = True
                return
            if self._queued:
                return
            self._queued = True
        self._batch.add(self)

    def attach(self, parked: Parked[Answer]) -> None:
        """`parked` is the request to answer; run at once if a wake-up came before."""
        with self._lock:
            self._parked = parked
            queue = self._missed and not self._queued
            self._queued = self._queued or queue
        if queue:
            self._batch.add(self)

    def attempt(self, _: int) -> None:
        """The room's attempt (it has none to make: the batch makes the answer)."""
        self.set()

    def at_deadline(self) -> Answer | None:
        """The room's answer at the deadline: nothing new; or None while a re-run is queued
        or running (the request then waits for it with no deadline of its own: the re-run's
        budget and the statement timeout bound it, and `make`'s hand-over answers)."""
        with self._lock:
            pending = self._queued or self._running
            self._expired = pending
        if not pending:
            return self.expired()
        parked = self._parked
        if parked is not None:
            parked.deadline = math.inf
        return None

    def expired(self) -> Answer:
        """The answer of a wait that ended with nothing new: the id to ask again with."""
        return _respond(self._step.expire())

    def make(self) -> HandOver | None:
        """Run the query again: the hand-over of its answer, or None while the answer is the
        same (it waits on). Until handed over it counts as running, so that a deadline
        meanwhile waits for this answer instead of answering that nothing came."""
        parked = self._parked
        if parked is None or parked.finished:
            with self._lock:
                self._queued = self._running = False
            return None
        with self._lock:
            self._queued = False
            self._running = True
        reply: Reply | None = None
        failed: Answer | None = None
        try:
            # Within the budget: a query's run only (none when it takes the step another
            # subscriber of its query ran), as a stream's part. The right to read and the
            # counts are the pass's (`PassReads`); the revision counter it reads itself: a
            # wake-up while it is queued is not kept apart, and must not be missed.
            reply = self._step.attempt(False, self._budget, self._batch.reads)
        except Exception as error:  # noqa: BLE001 - a REVOKE, the timeout or a bug: its answer
            failed = to_response(error)
        with self._lock:
            # It stops running here only when nothing is handed over; the deadline's mark is
            # read in the same hold, so that one of the two answers.
            expired = self._expired
            self._running = reply is not None or failed is not None or expired
        if reply is None and failed is None and not expired:
            return None  # the answer is the same: it waits on
        answer = failed
        if answer is None:
            try:
                answer = self.expired() if reply is None else _respond(reply)
            except Exception as error:  # noqa: BLE001 - a bug: its answer
                answer = to_response(error)
        return functools.partial(self._hand_over, parked, answer)

    def _hand_over(self, parked: Parked[Answer], answer: Answer) -> None:
        try:
            parked.decide(answer)
        except Exception:  # a broken connection is the server's to close
            log.warning("handing over a live query's answer failed", exc_info=True)
        finally:
            with self._lock:
                self._running = False


def _respond(reply: Reply) -> Answer:
    return Answer(encode_reply(reply), 200, "text/event-stream; charset=utf-8", SSE_HEADERS)


class _Asked(NamedTuple):
    """A request's parameters but its id, checked."""

    text: str  # the query
    wait_ms: int
    offsets: bool


class _Kept:
    """What a long poll's first request made that its repeats on the connection take again
    (`route_memo`): its parameters, and the engine session of the connection's last poll."""

    __slots__ = ("asked", "session")

    def __init__(self, asked: _Asked) -> None:
        self.asked = asked
        self.session: Session | None = None


def _asked(ctx: Context) -> tuple[_Asked, _Kept | None]:
    """The request's parameters but its id (a 400 for a wrong one), and what its connection
    keeps for its repeats (None: nothing). A long poll's repeat (`route_memo`: its first
    request's parameters, another id) takes what its first request made of them."""
    memo: RouteMemo[Routed] | None = ctx.environ.get(MEMO_KEY)
    if memo is not None:
        kept = memo.kept
        if type(kept) is _Kept:
            return kept.asked, kept
    asked = _Asked(
        ctx.require("query"),
        min(ctx.whole("wait", DEFAULT_WAIT_SSE_MS) or 0, MAX_WAIT_MS),
        flag(ctx, "offsets"),
    )
    if memo is not None and memo.route is not None:  # noted: its repeats come with these
        memo.kept = made = _Kept(asked)
        return asked, made
    return asked, None


def _session(ctx: Context, kept: _Kept | None) -> Session:
    """The request's engine session: its connection's last poll's again when that one is
    what a new one would be, the same principal's in the same database (still the one of
    its name: a database dropped and made again is another). Nothing of a request stays in
    it (a long poll's reads open no transaction: its close at each request's end rolls back
    nothing), and who asks is checked at every request all the same: their token before
    the route (`App._dispatch`), their right to read the table at each ask and run."""
    if kept is not None:
        session = kept.session
        if (
            session is not None
            and session.principal is ctx.principal
            and session.catalog.database(ctx.database) is session.database
        ):
            return session
    session = ctx.app.instance.session(database=ctx.database, principal=ctx.principal)
    if kept is not None:
        kept.session = session
    return session


def subscribe_route(ctx: Context) -> Answer | Parked[Answer]:
    (text, wait_ms, offsets), kept = _asked(ctx)
    asked = ctx.args.get("id") or ctx.request.headers.get("Last-Event-ID") or None
    app = ctx.app
    # The session lives as long as the request waits: the waiting room runs the query
    # again with it when a commit touches what it reads.
    session = _session(ctx, kept)
    budget = app.feeds.work_budget
    room = app.waiting_room
    owner = place_owner(ctx.principal.name, ctx.principal.is_admin)
    places = room.wait_places(app.wait_slots)  # shared fairly by user
    poll: _Poll | None = None
    step: Reply | LiveWait | None = None
    reply: Reply | None
    try:
        # The request's own work runs at most one query, within the budget entered for it
        # alone: the ask's snapshot when it answers at once, else the attempt's re-run (a
        # re-poll that waits, most of them, runs none).
        step = app.instance.subscriptions.ask(session, text, asked, offsets, budget)
        if isinstance(step, Reply):
            reply = step
        elif wait_ms <= 0 or not places.take(owner):
            reply = step.attempt(False, budget) or step.expire()
        else:
            # Every re-run is work of the client's choosing (a window's sort, a WHERE,
            # the changed buckets' rows, a maintained answer's update): on its owner's
            # share of the room's pool, within the statement timeout, never on the
            # room's thread.
            poll = _Poll(step, woken(room, owner), budget)
            step.watch(poll)
            # A commit between the read and the watch is not missed.
            reply = step.attempt(False, budget)
    except BaseException:
        if poll is not None:  # a REVOKE or the timeout in the attempt: no wait is left
            assert isinstance(step, LiveWait)
            step.expire()
            places.give_back(owner)
        session.close()
        raise
    if reply is not None:
        if poll is not None:
            places.give_back(owner)
        session.close()
        return _respond(reply)
    assert poll is not None and isinstance(step, LiveWait)

    def release() -> None:
        places.give_back(owner)
        session.close()

    parked: Parked[Answer] = Parked(
        None,
        0,
        poll.attempt,
        poll.at_deadline,
        time.monotonic() + wait_ms / 1000,
        release,
        kind=LIVE,
        at_close=poll.expired,
    )
    room.park(parked)
    poll.attach(parked)
    return parked
