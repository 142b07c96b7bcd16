"""The running statement's deadline, for the evaluation loops one value can keep busy.

Most of a statement's time goes by rows, and the scans stop it at its deadline between
rows (`relations.bounded`). But one row's expression can take long by itself when the client
chooses the sizes (a LIKE of a 4 KB pattern over a 100 KB text): such a loop calls `check`
every so often. Plans are shared between runs and threads, so the deadline is not compiled
into them; `Session.execute` makes the running session known to its thread (`running`),
and `check` asks it for the statement's deadline. Outside a statement (a caller that is not
a session, a thread of its own) `check` does nothing.

`make_way` is for long work that holds no lock (an answer's encoding, a copy page's keys, a
waiter's filter): its steps are C calls of a chunk each, and a thread waiting for the
interpreter lock gets it only after a switch interval, at each step of its own (a commit has
many); so the work lets the lock go for a moment now and then. And a client's own work
(inside `running(..., bulk=True)`) takes turns: past its first turn, its thread runs only
while it holds the one `BULK` turn (handed on fairly by owner: `Turns`), so however many
users' copies and filters run at once, the threads answering everyone else compete for the
interpreter lock with one of them, not with all (each further one made every step of
theirs wait again). A protocol layer's own steps of a client's long work (a session's
pipelined statements, a COPY's batches) take the same turns, for their user (`Steps`).
Such work is a long request (`admission.running_long`): before its first wait for a turn,
the request's admission place goes to the long lane or on, so that the few places cheap
requests need are never held by work waiting for its turn.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Hashable
from contextvars import ContextVar
from typing import Protocol

from refimpl.engine import admission
from refimpl.engine.storage.locks import reading_under_lock
from refimpl.errors import StatementTimeout


class DeadlineSource(Protocol):
    """Who knows when the running statement must stop (a session)."""

    def statement_deadline(self) -> float | None:
        """time.monotonic() at which the running statement stops; None: no statement."""
        ...


class running:  # noqa: N801 - used as the function it was: `with running(source):`
    """While inside, `check` on this thread stops at `source`'s statement deadline; with
    `bulk` (a waiter's own work, a copy page: work of a client's choosing that no one else
    waits for), `make_way` takes turns with the other such work too. A class rather than a
    generator: every statement enters one, and a generator costs more."""

    __slots__ = ("source", "bulk", "_token")

    def __init__(self, source: DeadlineSource, *, bulk: bool = False) -> None:
        self.source = source
        self.bulk = bulk

    def __enter__(self) -> None:
        # The one context variable holds both the source and `bulk`: each statement sets
        # and resets one variable, not two (a set costs about as much as a point read's
        # lookups).
        self._token = _current.set(self)

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)
        if self.bulk:
            BULK.give_up()  # the next in line need not wait for the turn to lapse


# The innermost `running` of the thread (its source and whether its work is a client's own,
# for which `make_way` takes `BULK` turns); None outside every statement.
_current: ContextVar[running | None] = ContextVar("statement_deadline", default=None)


# `with running(source):` for a caller that keeps one `running(source)` (not `bulk`) of its
# own, a session's: `token = enter(kept)`, then `leave(token)` in a `finally`. Two C calls a
# statement where a `running` made and entered each time costs three Python calls and an
# object; the token is the caller's, so the kept one may be entered again inside itself.
enter = _current.set
leave = _current.reset


# Whose long work the thread does (`working_for`): its turns' owner; None: the thread's own.
_owner: ContextVar[Hashable | None] = ContextVar("long_work_owner", default=None)


class working_for:  # noqa: N801 - a context as `running` is
    """While inside, the calling thread's long work (`make_way` within `running(...,
    bulk=True)`) takes its turns as `owner`'s (a user's name), so that the turns go round
    users rather than threads: a user's two copy pages at once get one turn a round."""

    __slots__ = ("_owner", "_token")

    def __init__(self, owner: Hashable | None) -> None:
        self._owner = owner

    def __enter__(self) -> None:
        self._token = _owner.set(self._owner)

    def __exit__(self, *exc: object) -> None:
        _owner.reset(self._token)


def check() -> None:
    """StatementTimeout when the running statement is past its deadline."""
    inside = _current.get()
    if inside is None:
        return
    deadline = inside.source.statement_deadline()
    if deadline is not None and time.monotonic() > deadline:
        raise StatementTimeout.ran_too_long()


def time_left() -> float | None:
    """Seconds until the running statement's deadline (negative past it); None: none."""
    inside = _current.get()
    if inside is None:
        return None
    deadline = inside.source.statement_deadline()
    return None if deadline is None else deadline - time.monotonic()


# Long work lets the interpreter lock go for TURN_PAUSE_SECONDS after each TURN_SECONDS of
# its steps (`make_way`), as a waiter's own work does.
TURN_SECONDS = 0.002
TURN_PAUSE_SECONDS = 0.0001
# A thread whose last step was longer ago than this starts new work: its first turn is free.
FRESH_AFTER_SECONDS = 0.050
# The turn passes on when its holder has not asked for it again within this (its work ended,
# or one step of it ran long).
TURN_LAPSES_SECONDS = 4 * TURN_SECONDS


class Turns:
    """One turn at a time for long work, shared fairly by owner: owners (a user, or a thread
    for work that names none) get it in turn, in the order they first asked, one turn each
    while others wait; an owner's threads take its turns in the order they asked.

    A holder that stops asking (its work ended between two turns) keeps the turn until
    `lapses` seconds after it took it, never longer: nothing ever waits on a holder that
    is gone."""

    def __init__(self, lapses: float = TURN_LAPSES_SECONDS) -> None:
        self._lapse_seconds = lapses
        self._condition = threading.Condition(threading.Lock())
        self._holder: int | None = None
        self._lapses = 0.0
        # Owners waiting, in the order of their next turns; each one's threads in order.
        self._queue: OrderedDict[Hashable, deque[int]] = OrderedDict()

    def next_turn(self, owner: Hashable | None = None) -> None:
        """Give up the turn if the caller holds it, then take it again after the owners
        waiting before `owner` (None: the calling thread) had theirs; returns holding it
        (until it asks again, or `lapses` seconds at most)."""
        me = threading.get_ident()
        key = ("thread", me) if owner is None else owner
        with self._condition:
            if self._holder == me:
                self._holder = None
                self._condition.notify_all()
            self._queue.setdefault(key, deque()).append(me)
            while True:
                now = time.monotonic()
                if self._holder is not None and now >= self._lapses:
                    self._holder = None  # its holder never asked again
                if self._holder is None:
                    first, threads = next(iter(self._queue.items()))
                    if threads[0] == me:
                        threads.popleft()
                        if threads:
                            self._queue.move_to_end(first)  # the other owners' turns first
                        else:
                            del self._queue[first]
                        self._holder = me
                        self._lapses = now + self._lapse_seconds
                        return
                    # The next in line is waking up; look again soon.
                    self._condition.wait(TURN_LAPSES_SECONDS)
                else:
                    self._condition.wait(max(self._lapses - now, 0.0001))

    def give_up(self) -> None:
        """The caller's turn, if it holds it, goes to the next in line now (its work ended)."""
        if self._holder != threading.get_ident():
            return  # only the caller makes itself the holder: read without the lock
        with self._condition:
            if self._holder == threading.get_ident():
                self._holder = None
                self._condition.notify_all()

    def waiting(self) -> int:
        """How many threads wait for the turn now."""
        with self._condition:
            return sum(len(threads) for threads in self._queue.values())


BULK = Turns()

_turns = threading.local()


def make_way() -> None:
    """Called between the steps of long work that holds no lock: after each TURN_SECONDS
    of a thread's steps, it lets the interpreter lock go for TURN_PAUSE_SECONDS, and a
    client's own work (`running(..., bulk=True)`) past its first TURN_SECONDS waits for its
    next turn of `BULK` too, so that threads answering others run meanwhile (the waiting
    room's thread and the workers' answers to everyone never wait for a turn). Never inside
    a lock that others wait for: the pause and the turn would make them wait longer."""
    now = time.monotonic()
    due = getattr(_turns, "due", None)
    last = getattr(_turns, "last", 0.0)
    _turns.last = now
    if due is None or now - last > FRESH_AFTER_SECONDS:
        _turns.due = now + TURN_SECONDS  # new work: its first turn runs at once
    elif now >= due:
        time.sleep(TURN_PAUSE_SECONDS)
        inside = _current.get()
        # Not under a lock: a commit would wait for the turn.
        if inside is not None and inside.bulk and not reading_under_lock():
            # A request's own long work gives up the admission place it may hold (for a
            # place of the long lane, or none) before it waits for its turn: two users'
            # initial copy pages waiting for turns held both places, and every cheap
            # request (/health too) waited for one of them to end.
            admission.running_long()
            BULK.next_turn(_owner.get())
        now = time.monotonic()
        _turns.due = now + TURN_SECONDS
        _turns.last = now


class Steps:
    """A client's own long work done in steps, one thread at a time: a protocol session's
    pipelined messages, a COPY's batches of rows. Call `next()` before each step and `end()`
    when the work stops (its last step done, or it waits for its client): the steps of its
    first TURN_SECONDS run at once, so a single query or a short COPY never waits; past
    them, each step after TURN_SECONDS more lets the interpreter lock go for a moment, hands
    the thread's admission place on and runs only once it holds the `BULK` turn for `owner`
    (its user), after the other owners waiting had theirs. One user's pipeline or COPY thus
    takes its share of the interpreter with the other users' long work (their filters,
    copy pages, pipelines), not more, and leaves the threads answering everyone else one
    such thread to compete with."""

    __slots__ = ("_owner", "_due")

    def __init__(self, owner: Hashable | None) -> None:
        """`owner`: whose work it is (a user's name); None: the calling thread's."""
        self._owner = owner
        self._due = 0.0  # 0: no step yet

    def next(self) -> None:
        """Before a step: at once within the work's first turn, else after its next turn."""
        now = time.monotonic()
        if not self._due:
            self._due = now + TURN_SECONDS
            return
        if now < self._due:
            return
        time.sleep(TURN_PAUSE_SECONDS)
        if not reading_under_lock():  # a commit would wait for the turn
            # Its admission place goes on before it waits (as `make_way`'s): waiting for a
            # turn is a wait. Not `running_long`: between two steps a protocol's cancel
            # request is not this step's to take (the next statement stops at it).
            admission.waiting()
            BULK.next_turn(self._owner)
        self._due = time.monotonic() + TURN_SECONDS

    def end(self, more: bool = False) -> None:
        """The work stops for now: a turn the calling thread holds (this work's, or that of
        work it ran within it: a COPY inside a pipeline) goes to the next in line. Its next
        step starts a new first turn, unless `more` (the client's next steps were already
        there: a pipeline whose answers wait to be sent goes on where it was)."""
        BULK.give_up()
        if not more:
            self._due = 0.0
