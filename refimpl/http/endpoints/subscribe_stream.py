"""GET /api/subscribe?stream=true: a live query as one long-lived answer of server-sent events.

The same events as the long polls of `subscribe_route` (a snapshot or the difference from
the client's id first, then a `rows` event at each commit that changes the answer, each
with its id), sent over one connection: a change costs the server one send per subscriber,
not an answer and the next request. The stream holds no worker thread: it is parked in the
waiting room, which sends its heartbeats and its end at shutdown; a commit that touches its
query wakes it on its owner's share of the room's pool, where it asks the subscription
manager again (rights checked again) and hands its part to the server itself. The streams of
a user's pass whose parts are one change (identical subscriptions woken by one commit) are
sent it at once: each its own `id:` line, then the event encoded once, from one buffer
(`Headed`, `WaitingRoom.send_headed`).

Flow control: a stream makes its next part only once the server has sent the previous one
(`Parked.drained`); a commit meanwhile is noted, and the part made then is the difference
from the last version sent, so a client that reads slowly gets fewer, larger parts (or a
snapshot, once its version is no longer kept), never a backlog.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from refimpl.engine.access import AccessControl
from refimpl.engine.access.control import CheckedToken
from refimpl.engine.event_streams import Credential
from refimpl.engine.features.live_answers import Reply, Subscription
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait, SubscriptionManager
from refimpl.engine.rights import READ
from refimpl.engine.session import Session
from refimpl.errors import KdbError
from refimpl.http.auth import CREDENTIALS_KEY, ConnectionCredentials
from refimpl.http.context import Context
from refimpl.http.encode import Answer
from refimpl.http.endpoints.change_encoding import RETRY_MS
from refimpl.http.endpoints.feed_args import flag
from refimpl.http.endpoints.stream_credentials import request_credential
from refimpl.http.endpoints.subscribe_route import (
    SSE_HEADERS,
    HandOver,
    Headed,
    Runs,
    Woken,
    reply_event,
    rows_event,
    subscribe_route,
    woken,
)
from refimpl.http.endpoints.woken_batch import Taken
from refimpl.waiting.owners import Budget
from refimpl.waiting.parked import LIVE_STREAM, Parked, Part
from refimpl.waiting.places import FairPlaces, place_owner

HEARTBEAT = b": heartbeat\n\n"
HEADERS = (("Content-Type", "text/event-stream; charset=utf-8"), *SSE_HEADERS.items())
log = logging.getLogger("refimpl.subscribe")
# In the first event's block (a long poll's answer has it in a block of its own).
_RETRY = f"retry: {RETRY_MS}\n".encode()


class FirstRunEnters:
    """A part's statement budget as its query runs take it (`runs` given as the budget of the
    runs of one part, `runs.leave()` once it is made, or `with runs:` around its making):
    `budget` is entered at the first run that asks for it, nothing more at later asks, and
    left by `leave` (or the `with`'s end, which passes on an error). Every run of one part
    (a re-run, then a snapshot when its version is gone) counts against one statement
    timeout, from the first run's start until the part is made, never one timeout each; a
    part that runs no query (it takes the step another stream of its query ran) enters none,
    and its maker need not call `leave` (`entered` is None). One object serves the parts of
    a stream one after another, not an `ExitStack` and a closure a part."""

    __slots__ = ("_budget", "entered")

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        # The budget a run of the part under way entered; None: none did.
        self.entered: AbstractContextManager[object] | None = None

    def __enter__(self) -> FirstRunEnters:
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        entered, self.entered = self.entered, None
        return None if entered is None else entered.__exit__(*exc)

    def leave(self) -> None:
        """The part is made: the budget a run entered is left."""
        entered, self.entered = self.entered, None
        if entered is not None:
            entered.__exit__(None, None, None)

    def __call__(self) -> AbstractContextManager[object]:
        if self.entered is None:
            entered = self._budget()
            entered.__enter__()
            self.entered = entered
        return _ENTERED


_ENTERED = nullcontext()  # what a run enters: the budget, entered already


def _later(data: bytes) -> Answer:
    """A later part of the stream: only its bytes count (the head went with the first)."""
    answer = Answer(data, 200, "text/event-stream")
    answer.headers = []
    return answer


class _LiveStream:
    """One client's stream of a subscription: the waker of its `LiveWait`, and what makes
    its parts (see the module docstring).

    A wake-up goes straight to the stream's owner's share of the room's pool (`make`, in
    the owner's `Woken` batch), which makes the part and hands it over itself, never
    through the room's thread, which only sends the heartbeats at the stream's deadlines. `_lock`
    orders `_busy` (a part is being made or is in flight: one at a time) and `_woken` (a
    wake-up came meanwhile: one more is made after it); it is never held while the query
    runs."""

    def __init__(
        self,
        manager: SubscriptionManager,
        session: Session,
        text: str,
        offsets: bool,
        token: _TokenLook,
        heartbeat_s: float,
        max_age_s: float,
        budget: Budget,
    ) -> None:
        self._manager = manager
        # Its parts' budget: one part at a time is made (`_busy`), each within one `with`.
        self._runs = FirstRunEnters(budget)
        self.max_age_s = max_age_s
        self.ends_at = time.monotonic() + max_age_s
        self._session = session
        self._text = text
        self._offsets = offsets
        self._token = token
        self.heartbeat_s = heartbeat_s
        self._wait: LiveWait | None = None
        self._lock = threading.Lock()
        self._busy = True  # until the head is sent
        self._woken = False
        self.parked: Parked[Answer] | None = None
        self._batch: Woken | None = None  # runs `make` on the owner's pool, once parked
        self._headed = False  # the room's deliverer sends headed parts (`Headed`)
        # The `id:` line's start of the subscription of its last headed part.
        self._named: Subscription | None = None
        self._id_line = b""

    def start(self, parked: Parked[Answer], batch: Woken, headed: bool) -> None:
        """Parked as `parked`; `batch` runs its `make` on the owner's share of the pool;
        `headed`: its re-runs' parts may be `Headed` (`WaitingRoom.send_headed`)."""
        self.parked = parked
        self._batch = batch
        self._headed = headed

    def set(self) -> None:
        """A commit touched the query, or another request of the subscription took over
        (the engine's wake board; cheap, never blocks)."""
        # Its lock by `acquire` and `release`: a `with` binds its two methods each time
        # (a hundred streams woken by a commit, on the committing thread).
        lock = self._lock
        lock.acquire()
        try:
            batch = self._batch
            if self._busy or batch is None:
                self._woken = True  # made once the part in flight is sent
                return
            self._busy = True
        finally:
            lock.release()
        batch.add(self)

    def first(self, reply: Reply) -> bytes:
        """The head's events: `reply` (the answer to the request), and every change after
        it that is already committed; the stream then waits on the newest, and makes its
        next part once the head is sent."""
        return _RETRY + self._follow(reply)

    def _follow(self, reply: Reply, checked: bool = False, wait: LiveWait | None = None) -> bytes:
        """`reply`'s event and those of the changes committed since, each asked for with the
        id before it (rights checked again at each, but after `reply` when its making just
        checked them: `checked`, a re-run's); watches the newest. `wait`: the wait that
        made `reply` and stayed on the wake board (`LiveWait.attempt(keep=True)`)."""
        return self._events(reply, self._manager.follow(self._session, reply, checked, wait), wait)

    def _events(
        self,
        reply: Reply,
        step: Reply | LiveWait,
        wait: LiveWait | None,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> bytes:
        """`_follow`'s events, `step` being what the manager's `follow` gave for `reply`
        (`budget`: a snapshot's run, if one is due, is within it; `reads`: the pass they
        are made in, which waits for the commits they show to be durable before it sends
        them, as it does for `reply`: else each waits as it is made)."""
        event = reply_event(reply)
        if step is wait:
            # The same wait goes on, watched all along: no commit since its re-run's read
            # can have passed unseen (a wake-up meanwhile made `_woken` true).
            return event
        events = [event]
        while isinstance(step, Reply):
            events.append(reply_event(step))
            step = self._manager.follow(self._session, step, budget=budget, reads=reads)
        self._wait = step
        step.watch(self)
        if step.subscription.moved():
            # A commit between the query's run and the watch: the wake board did not see
            # it, so the next part is made once this one is sent.
            with self._lock:
                self._woken = True
        return b"".join(events)

    def make(self) -> HandOver | Headed | None:
        """Make the next part, or the end (on the owner's pool): its hand-over, or None when
        nothing changed. The stream stays busy until it is handed over and sent."""
        parked = self.parked
        assert parked is not None  # `start` came before any job
        runs = self._runs
        try:
            outcome = self._next(parked, runs)
        except Exception as error:  # a bug: the stream ends, the pool's thread goes on
            log.warning("making a live query's part failed", exc_info=True)
            outcome = self._end(f"the server failed ({type(error).__name__})")
        finally:
            if runs.entered is not None:  # (most parts take a step: no run, no budget)
                runs.leave()
        if isinstance(outcome, Headed):
            return outcome  # sent with those that share its body, then told `drained`
        if outcome is None:
            with self._lock:
                again, self._woken = self._woken, False
                self._busy = again
            if again:
                self._run_again()
            return None
        # A part's `drained` may come within the hand-over: it makes the next.
        return functools.partial(parked.decide, outcome)

    def _run_again(self) -> None:
        batch = self._batch
        assert batch is not None
        batch.add(self)

    def _next(
        self, parked: Parked[Answer], budget: Budget
    ) -> Answer | Part[Answer] | Headed | None:
        """The next part once a commit changed the answer (None: nothing changed); the last
        one when the stream ends (its token or right gone, or another request took over).
        A re-run's part while the same wait goes on is `Headed` when the deliverer sends
        such parts to `parked`'s client (its `outlet`, set once its head was handed over)."""
        wait = self._wait
        batch = self._batch
        assert wait is not None and batch is not None  # set before the stream is parked
        reads = batch.reads
        ended = self._token.gone_in(reads)
        if ended is not None:
            return self._end(ended)
        try:
            # Within the budget: a query's run (not the step the stream takes when another
            # stream of the query ran it), the statement timeout from its start. What the
            # parts of the pass read alike is read once (`PassReads`).
            reply = wait.attempt(True, budget, reads)
            if reply is None:
                return None
            if reply.kind == "none":
                reason = (
                    "the server is shutting down"
                    if self._manager.closed
                    else "another request of this subscription took over"
                )
                return self._end(reason)
            # A re-run's: its right was checked just now.
            step = self._manager.follow(self._session, reply, True, wait, budget, reads)
            if step is wait and self._headed and (outlet := parked.outlet) is not None:
                # Its event only, which the other streams that share the change end with,
                # after its `id:` line (`Reply.id`'s, the subscription's part made once).
                return Headed(outlet, self._head(reply), rows_event(reply), self.take_after)
            return Part(_later(self._events(reply, step, wait, budget, reads)))
        except KdbError as error:
            return self._end(str(error))  # a REVOKE, or the statement timeout

    def _head(self, reply: Reply) -> bytes:
        """The `id:` line of `reply`, a `rows` reply to this stream (`Reply.id`'s, the
        subscription's part made once)."""
        subscription = reply.subscription
        if subscription is not self._named:
            self._named = subscription
            self._id_line = b"id: %b." % subscription.id.encode()
        return b"%b%d\n" % (self._id_line, reply.version)

    def take_after(self, woken: list[Runs], at: int) -> Taken:
        """`TakesAfter`: the parts of `woken[at]` and the streams in a row after it that
        take the step this stream's part took (the manager's `take_steps`), as their
        `_next` would make them: streams of this manager whose token stands and whose
        parts may be `Headed`; their body is this part's (one change)."""
        manager = self._manager
        batch = self._batch
        assert batch is not None  # started: it made this stream's part
        reads = batch.reads
        looked = reads.looked
        # Those offered, and each one's outlet (two lists, not a pair a stream); one more
        # than take the step, maybe.
        streams: list[_LiveStream] = []
        outlets: list[object] = []
        take, take_outlet = streams.append, outlets.append

        def waits() -> Iterator[LiveWait]:
            for each in itertools.islice(woken, at, None):
                # (`_headed` is set when the stream is started: its `parked` is set then.)
                if (
                    type(each) is not _LiveStream
                    or each._manager is not manager
                    or not each._headed
                ):
                    return  # its `_next` makes its part (a part of its own)
                wait, outlet = each._wait, each.parked.outlet  # type: ignore[union-attr]
                if wait is None or outlet is None:
                    return
                key = each._token.key
                ended = looked.get(key)  # `_TokenLook.gone_in`'s, in line
                if ended is None:
                    ended = looked[key] = each._token.gone() or ""
                if ended:
                    return  # its `_next` makes its end
                take(each)
                take_outlet(outlet)
                yield wait

        first, versions = manager.take_steps(waits(), reads)
        if first is None:
            return Taken([], b"", [])
        body = rows_event(first)  # one change: encoded once, by the first's part
        sends: list[tuple[object, bytes]] = []
        send = sends.append
        # The version's end of the `id:` line, made once for the streams of one number
        # (those that began together): a concatenation a stream, not a format.
        number, numbered = b"", -1
        for stream, outlet, version in zip(streams, outlets, versions):  # noqa: B905
            subscription = stream._wait.subscription  # type: ignore[union-attr]  # offered
            if stream._named is not subscription:  # (its `_head`'s, in line)
                stream._named = subscription
                stream._id_line = b"id: %b." % subscription.id.encode()
            if version != numbered:
                number, numbered = b"%d\n" % version, version
            send((outlet, stream._id_line + number))
        del streams[len(sends) :]  # the one offered past those that took the step, if any
        return Taken(streams, body, sends)

    def drained(self) -> None:
        """The server sent every part so far: a wake-up that came meanwhile makes the next."""
        lock = self._lock  # (as `set` takes it)
        lock.acquire()
        try:
            again, self._woken = self._woken, False
            self._busy = again
        finally:
            lock.release()
        if again:
            self._run_again()

    def heartbeat(self) -> Answer | Part[Answer]:
        """A comment at each `heartbeat_s` (the room's deadline of the stream), or the end
        when its token or its right to read the table is gone (no commit need come), or at
        its max age."""
        ended = self._token.gone()
        now = time.monotonic()
        if now >= self.ends_at:
            ended = f"the stream reached its most age ({self.max_age_s:g} s)"
        wait = self._wait
        if ended is None and wait is not None:
            try:
                self._session.authorize(READ, wait.subscription.table)
            except KdbError as error:
                ended = str(error)
        if ended is not None:
            return self._end(ended)
        assert self.parked is not None
        self.parked.deadline = self.deadline(now)
        return Part(_later(HEARTBEAT))

    def deadline(self, now: float) -> float:
        """When the room looks at the stream next: its next heartbeat, or its max age."""
        return min(now + self.heartbeat_s, self.ends_at)

    def closing(self) -> Answer:
        return self._end("the server is shutting down")

    def release(self) -> None:
        """Its wake-ups end and its session closes (the request is finished)."""
        if self._wait is not None:
            self._wait.expire()  # off the wake board; its answer is not sent
        self._session.close()

    @staticmethod
    def _end(reason: str) -> Answer:
        """The last part: a comment saying why (an EventSource ignores it, then reconnects
        and is answered, or refused, as any request)."""
        return _later(f": the stream ended: {reason.replace(chr(10), ' ')}\n\n".encode())


class _TokenLook:
    """Whether the token a stream was opened with still stands: the connection's check of
    it while no user, token or grant changed since (`AccessControl.still_valid`, no look at
    the records), else a look at the records each time; within a pass of woken streams,
    one look for all the streams of one token and user (`gone_in`)."""

    __slots__ = ("_access", "_credential", "_checked", "key")

    def __init__(self, access: AccessControl, credential: Credential, ctx: Context) -> None:
        self._access = access
        self._credential = credential
        principal = credential.principal
        # What `gone` answers alike at one moment: the same token of the same principal. One
        # string (a tuple's `repr`, as distinct as the tuple): a string keeps its hash, a
        # tuple's is made again at each look (a pass looks once a stream).
        self.key = repr(
            (
                credential.token_key,
                principal.name,
                principal.is_admin,
                principal.only_database,
                credential.checked,
            )
        )
        kept = ctx.request.environ.get(CREDENTIALS_KEY)
        header = ctx.request.environ.get("HTTP_AUTHORIZATION")
        checked = None
        if isinstance(kept, ConnectionCredentials) and header and kept.header == header:
            checked = kept.checked
        self._checked: CheckedToken | None = checked

    def gone_in(self, reads: PassReads) -> str | None:
        """`gone`, looked at once in the pass of `reads` for the streams of one token and
        user: a pass is the parts one commit's wake-up makes, so each stream still ends at
        the change that comes after its token went (or at its heartbeat's own look)."""
        looked = reads.looked
        ended = looked.get(self.key)
        if ended is None:
            ended = looked[self.key] = self.gone() or ""  # "": it stands
        return ended or None

    def gone(self) -> str | None:
        """Why the stream must end because of its token; None: it stands."""
        credential = self._credential
        if not credential.checked:
            return None
        checked = self._checked
        if checked is not None and self._access.still_valid(checked):
            return None
        self._checked = None
        try:
            principal = self._access.principal_of_token_key(credential.token_key)
        except KdbError as error:
            return str(error)
        if principal != credential.principal:
            return "the token's user changed"
        return None


def subscribe(ctx: Context) -> Answer | Parked[Answer]:
    """GET /api/subscribe: its stream with `stream=true`, else one long poll."""
    if not flag(ctx, "stream"):
        return subscribe_route(ctx)
    text = ctx.require("query")
    asked = ctx.args.get("id") or ctx.request.headers.get("Last-Event-ID") or None
    return subscribe_stream(ctx, text, asked, flag(ctx, "offsets"))


def subscribe_stream(
    ctx: Context, text: str, asked: str | None, offsets: bool
) -> Answer | Parked[Answer]:
    """The stream of a subscription (see the module docstring). Without a wait place free
    for its user, the answer is its first events only, and ends: the client reconnects with
    the last id, as after any end."""
    credential = request_credential(ctx)
    app = ctx.app
    manager = app.instance.subscriptions
    session = app.instance.session(database=ctx.database, principal=ctx.principal)
    budget = app.feeds.work_budget
    room = app.waiting_room
    stream = _LiveStream(
        manager,
        session,
        text,
        offsets,
        _TokenLook(app.instance.access, credential, ctx),
        app.streams.options.heartbeat_s,
        app.streams.options.max_age_s,
        budget,
    )
    owner = place_owner(ctx.principal.name, ctx.principal.is_admin)
    places: FairPlaces = room.wait_places(app.wait_slots)
    if not places.take(owner):
        try:
            with budget():
                reply = manager.ask_now(session, text, asked, offsets)
        finally:
            session.close()
        return Answer(
            _RETRY + reply_event(reply), 200, "text/event-stream; charset=utf-8", SSE_HEADERS
        )
    try:
        with budget():
            reply = manager.ask_now(session, text, asked, offsets)
            head = stream.first(reply)
    except BaseException:
        stream.release()
        places.give_back(owner)
        raise

    def release() -> None:
        places.give_back(owner)
        stream.release()

    parked: Parked[Answer] = Parked(
        None,
        0,
        lambda _: None,  # poked by nobody: its wake-ups go to `work` (`_LiveStream.set`)
        stream.heartbeat,
        stream.deadline(time.monotonic()),
        release,
        kind=LIVE_STREAM,
        at_close=stream.closing,
        on_drained=stream.drained,
    )
    first = Answer(head, 200)
    first.headers = list(HEADERS)  # no length: the parts follow
    parked.decide(Part(first))
    # Every re-run is work of the client's choosing: on its owner's share of the room's
    # pool, within the statement timeout, never on the room's thread.
    stream.start(parked, woken(room, owner), room.sends_headed)
    room.park(parked)
    return parked
