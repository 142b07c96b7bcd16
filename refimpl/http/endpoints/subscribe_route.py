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
from typing import NamedTuple

from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.http.context import Context
from refimpl.http.encode import Answer
from refimpl.http.endpoints.changes_route import DEFAULT_WAIT_SSE_MS, MAX_WAIT_MS
from refimpl.http.endpoints.feed_args import flag
from refimpl.http.endpoints.subscribe_events import SSE_HEADERS, encode_reply

# Re-exported: `subscribe_stream` and the benches import them from here.
from refimpl.http.endpoints.subscribe_events import reply_event as reply_event
from refimpl.http.endpoints.subscribe_events import rows_event as rows_event
from refimpl.http.endpoints.woken_batch import HandOver, Woken, woken
from refimpl.http.endpoints.woken_batch import Headed as Headed
from refimpl.http.endpoints.woken_batch import Made as Made
from refimpl.http.endpoints.woken_batch import Runs as Runs
from refimpl.http.error_answers import to_response
from refimpl.http.route_memo import MEMO_KEY, Routed, RouteMemo
from refimpl.waiting.owners import Budget
from refimpl.waiting.parked import LIVE, Parked
from refimpl.waiting.places import FairPlaces, place_owner

log = logging.getLogger("refimpl.subscribe")


class _Poll:
    """A parked long poll of a live query, woken from the engine's wake board (`set`: cheap,
    never blocks): its user's batch (`Woken`) runs its query again within its budget and
    hands the answer to the server itself. A wake-up that comes before the request is
    parked is kept and handed on at `attach`. A deadline that comes while a re-run is queued
    or running, or made and not yet handed over, waits for it (`at_deadline`), so that its
    answer, or its statement timeout's 400, is what the client gets, as the spec says."""

    # Its state's start, as the class's defaults (`rearm` sets them again).
    _parked: Parked[Answer] | None = None
    _missed = False  # woken before it was parked
    _queued = False  # in its batch, not yet run
    _running = False  # its re-run is under way, or its answer not yet handed over
    _expired = False  # its deadline came while a re-run was queued or running
    # Answered with rows, its wait still on the wake board for the connection's re-poll
    # (`rearm`); `answered` is the reply it answered then.
    _between = False
    answered: Reply | None = None
    # The wait kept since the answer holds its request's wait place too (`keep_place`),
    # handed to the re-poll with the wait (`rearm`), else given back when the wait ends.
    _place = False

    def __init__(
        self,
        step: LiveWait,
        batch: Woken,
        budget: Budget,
        keeps: bool = True,
        give_back: Callable[[], None] | None = None,
    ) -> None:
        self.step = step
        self._batch = batch
        self._budget = budget
        # Whether its wait may be kept for a re-poll: only a connection that keeps what its
        # polls made (`_Kept`) takes it back, or lets it go when it closes.
        self._keeps = keeps
        # Gives its requests' wait place back (None: no place is kept with the wait).
        self._give_back = give_back
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            if self._between:
                # Woken between an answer and its re-poll (or a client that asks no more):
                # the wait ends, and the re-poll waits anew, reading the counter again. Not
                # kept to wake later: a connection that closed would hold it on the board.
                self._between = False
                end = True
                place, self._place = self._place, False
            elif self._parked is None:
                self._missed = True
                return
            elif self._queued:
                return
            else:
                self._queued = True
                end = False
        if end:
            self.step.expire()
            if place:
                self._place_back()
            return
        self._batch.add(self)

    def rearm(self) -> tuple[bool, bool]:
        """Take the wait kept since the answer for the connection's re-poll, which names
        that answer's version: (True, place) when it is still on the wake board, never woken
        since (a wake-up from now on is kept until `attach`), `place` whether the re-poll
        holds the wait place kept with it; (False, False): it has ended."""
        with self._lock:
            if not self._between:
                return False, False
            place = self._place
            self._between = self._place = False
            self._parked = None
            self._missed = self._queued = self._running = self._expired = False
        return True, place

    def forget(self) -> None:
        """No re-poll takes the wait kept since the answer: it ends (if still kept)."""
        with self._lock:
            between, self._between = self._between, False
            place, self._place = self._place, False
        if between:
            self.step.expire()
        if place:
            self._place_back()

    def keep_place(self) -> bool:
        """At its request's release: True when the wait is kept for the re-poll, which then
        takes the request's wait place with it (a re-poll takes none of its own)."""
        if self._give_back is None:
            return False
        with self._lock:
            self._place = kept = self._between
        return kept

    def _place_back(self) -> None:
        give_back = self._give_back
        assert give_back is not None  # a place is kept only with it
        give_back()

    def attach(self, parked: Parked[Answer]) -> None:
        """`parked` is the request to answer; run at once if a wake-up came before."""
        with self._lock:
            self._parked = parked
            queue = self._missed and not self._queued
            self._queued = self._queued or queue
            self._missed = False  # handed on: the re-run's
            if self._expired:
                # Its deadline came before this (`at_deadline`): it waits for the re-run.
                parked.deadline = math.inf
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
            # A wake-up before `attach` is pending too: the re-run it queues there answers.
            pending = self._queued or self._running or self._missed
            self._expired = pending
        if not pending:
            return self.expired()
        parked = self._parked
        if parked is not None:
            parked.deadline = math.inf
        return None

    def expired(self) -> Answer:
        """The answer of a wait that ended with nothing new: the id to ask again with."""
        return _respond(self.step.expire())

    def make(self) -> HandOver | None:
        """Run the query again: the hand-over of its answer, or None while the answer is the
        same (it waits on). Until handed over it counts as running, so that a deadline
        meanwhile waits for this answer instead of answering that nothing came."""
        parked = self._parked
        if parked is None or parked.finished:
            with self._lock:
                self._queued = self._running = self._between = False
                place, self._place = self._place, False
            # Woken after its answer was made: a wait kept for the re-poll ends here, and
            # the re-poll reads the counter again.
            self.step.expire()
            if place:
                self._place_back()
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
            # `keep`: an answer of rows leaves the wait on the wake board, for the re-poll
            # that names it (`rearm`), unless another request took the subscription over.
            reply = self.step.attempt(True, self._budget, self._batch.reads)
            keep = reply is not None and reply.kind == "rows" and self.step.goes_on(reply)
        except Exception as error:  # noqa: BLE001 - a REVOKE, the timeout or a bug: its answer
            failed = to_response(error)
            keep = False
        if failed is not None:
            self.step.expire()  # off the wake board: its answer is the error
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
        return functools.partial(self._hand_over, parked, answer, reply if keep else None)

    def _hand_over(self, parked: Parked[Answer], answer: Answer, kept: Reply | None = None) -> None:
        with self._lock:
            # Kept for the re-poll unless no connection keeps the poll, a wake-up came since
            # the answer was made (then queued: its pass ends the wait) or the request waits
            # no more (dropped). Kept before the answer goes out: a connection that closes
            # as it is sent (`forget`) finds it, and ends it.
            if kept is not None and self._keeps and not self._queued and not parked.finished:
                self._between = True
                self.answered = kept
                kept = None
        if kept is not None:
            self.step.expire()
        try:
            parked.decide(answer)
        except Exception:  # a broken connection is the server's to close
            log.warning("handing over a live query's answer failed", exc_info=True)
        finally:
            with self._lock:
                if self._parked is parked:  # not a re-poll's, which took the wait since
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

    __slots__ = ("asked", "session", "waits", "poll")

    def __init__(self, asked: _Asked) -> None:
        self.asked = asked
        self.session: Session | None = None
        self.waits: _Waits | None = None
        self.poll: _Poll | None = None  # the connection's last parked poll

    def let_go(self) -> None:
        """The connection closed (or asks another way): a wait kept for its re-poll ends
        (`RouteMemo.forget`)."""
        poll = self.poll
        if poll is not None:
            poll.forget()


class _Waits(NamedTuple):
    """Where a principal's long polls wait: whose share of the wait places they take
    (`place_owner`), the server's places shared fairly by user, and the user's batch of
    woken live queries (each the same object request after request)."""

    principal: Principal
    owner: Hashable
    places: FairPlaces
    batch: Woken


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


def _waits(ctx: Context, kept: _Kept | None) -> _Waits:
    """Where the request's principal waits: what its connection's last poll found when it
    was the same principal's (a repeat looks nothing up again), else looked up and kept."""
    principal = ctx.principal
    if kept is not None:
        waits = kept.waits
        if waits is not None and waits.principal is principal:
            return waits
    room = ctx.app.waiting_room
    owner = place_owner(principal.name, principal.is_admin)
    # The places shared fairly by user; the batch that makes the user's woken answers.
    waits = _Waits(principal, owner, room.wait_places(ctx.app.wait_slots), woken(room, owner))
    if kept is not None:
        kept.waits = waits
    return waits


def subscribe_route(ctx: Context) -> Answer | Parked[Answer]:
    (text, wait_ms, offsets), kept = _asked(ctx)
    asked = ctx.args.get("id") or ctx.request.headers.get("Last-Event-ID") or None
    app = ctx.app
    # The session lives as long as the request waits: the waiting room runs the query
    # again with it when a commit touches what it reads.
    session = _session(ctx, kept)
    budget = app.feeds.work_budget
    _, owner, places, batch = _waits(ctx, kept)
    poll: _Poll | None = None
    step: Reply | LiveWait | None = None
    reply: Reply | None
    last = None if kept is None else kept.poll
    again = _again(last, asked, session)
    # Whether the request holds a wait place: a re-poll may hold the one its wait kept.
    placed = again is not None and again.place
    try:
        # The request's own work runs at most one query, within the budget entered for it
        # alone: the ask's snapshot when it answers at once, else the attempt's re-run (a
        # re-poll that waits, most of them, runs none).
        if again is not None:
            # The re-poll of the version just answered: `follow` checks the right to read
            # (and whether the subscription is still kept) as `ask` does, and gives the
            # wait kept on the wake board since the answer when no other request took the
            # subscription over; else it ended that wait, and this is `ask`'s answer.
            step = app.instance.subscriptions.follow(
                session, again.reply, wait=again.poll.step, budget=budget
            )
        else:
            if last is not None:
                last.forget()  # another subscription, version or session: not re-polled
            step = app.instance.subscriptions.ask(session, text, asked, offsets, budget)
        if isinstance(step, Reply):
            reply = step
        elif wait_ms <= 0 or not (placed or places.take(owner)):
            reply = step.attempt(False, budget) or step.expire()
        elif again is not None and step is again.poll.step:
            # On the wake board since its answer's re-run read the counter, and never woken
            # since (`rearm`): no commit after that version can have been missed, and one
            # from now on is kept until `attach`.
            poll = again.poll
            placed = True
            reply = None
        else:
            # Every re-run is work of the client's choosing (a window's sort, a WHERE,
            # the changed buckets' rows, a maintained answer's update): on its owner's
            # share of the room's pool, within the statement timeout, never on the
            # room's thread.
            placed = True
            give_back = functools.partial(places.give_back, owner)
            poll = _Poll(step, batch, budget, kept is not None, give_back)
            step.watch(poll)
            # A commit between the read and the watch is not missed.
            reply = step.attempt(False, budget)
    except BaseException:
        if poll is not None:  # a REVOKE or the timeout in the attempt: no wait is left
            assert isinstance(step, LiveWait)
            step.expire()
        elif again is not None:  # a REVOKE in `follow`: the kept wait ends
            again.poll.step.expire()
        if placed:
            places.give_back(owner)
        session.close()
        raise
    if reply is not None:
        if placed:
            places.give_back(owner)
        session.close()
        return _respond(reply)
    assert poll is not None and isinstance(step, LiveWait)
    waiting = poll

    def release() -> None:
        if not waiting.keep_place():
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
    app.waiting_room.park(parked)
    poll.attach(parked)
    if kept is not None:
        kept.poll = poll
    return parked


class _Again(NamedTuple):
    """A re-poll of the version its connection's last poll answered: that poll, its wait
    taken again (`_Poll.rearm`), the reply it answered, and whether the wait's place came
    with it."""

    poll: _Poll
    reply: Reply
    place: bool


def _again(last: _Poll | None, asked: str | None, session: Session) -> _Again | None:
    """The re-poll of the version `last` (the connection's last poll) answered, in the same
    session, with its wait taken again; else None."""
    if last is None:
        return None
    answered = last.answered
    if answered is None or asked != answered.id or last.step.session is not session:
        return None
    taken, place = last.rearm()
    return _Again(last, answered, place) if taken else None
