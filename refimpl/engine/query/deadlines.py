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
while it holds the one `BULK` turn (handed on in the order asked), so however many users'
copies and filters run at once, the threads answering everyone else compete for the
interpreter lock with one of them, not with all (each further one made every step of
theirs wait again). Such work is a long request (`admission.running_long`): before its
first wait for a turn, the request's admission place goes to the long lane or on, so that
the few places cheap requests need are never held by work waiting for its turn.
"""

from __future__ import annotations

import threading
import time
from collections import deque
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


_current: ContextVar[DeadlineSource | None] = ContextVar("statement_deadline", default=None)


# Inside a client's own work (`running(..., bulk=True)`): `make_way` takes `BULK` turns.
_bulk: ContextVar[bool] = ContextVar("bulk_work", default=False)


class running:  # noqa: N801 - used as the function it was: `with running(source):`
    """While inside, `check` on this thread stops at `source`'s statement deadline; with
    `bulk` (a waiter's own work, a copy page: work of a client's choosing that no one else
    waits for), `make_way` takes turns with the other such work too. A class rather than a
    generator: every statement enters one, and a generator costs more."""

    __slots__ = ("_source", "_token", "_bulk", "_bulk_token")

    def __init__(self, source: DeadlineSource, *, bulk: bool = False) -> None:
        self._source = source
        self._bulk = bulk

    def __enter__(self) -> None:
        self._token = _current.set(self._source)
        self._bulk_token = _bulk.set(self._bulk)

    def __exit__(self, *exc: object) -> None:
        _bulk.reset(self._bulk_token)
        _current.reset(self._token)
        if self._bulk:
            BULK.give_up()  # the next in line need not wait for the turn to lapse


def check() -> None:
    """StatementTimeout when the running statement is past its deadline."""
    source = _current.get()
    if source is None:
        return
    deadline = source.statement_deadline()
    if deadline is not None and time.monotonic() > deadline:
        raise StatementTimeout.ran_too_long()


def time_left() -> float | None:
    """Seconds until the running statement's deadline (negative past it); None: none."""
    source = _current.get()
    if source is None:
        return None
    deadline = source.statement_deadline()
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
    """One turn at a time for long work, handed on in the order it was asked for.

    A holder that stops asking (its work ended between two turns) keeps the turn until
    `lapses` seconds after it took it, never longer: nothing ever waits on a holder that
    is gone."""

    def __init__(self, lapses: float = TURN_LAPSES_SECONDS) -> None:
        self._lapse_seconds = lapses
        self._condition = threading.Condition(threading.Lock())
        self._holder: int | None = None
        self._lapses = 0.0
        self._queue: deque[int] = deque()

    def next_turn(self) -> None:
        """Give up the turn if the caller holds it, then take it again after those who asked
        before; returns holding it (until it asks again, or `lapses` seconds at most)."""
        me = threading.get_ident()
        with self._condition:
            if self._holder == me:
                self._holder = None
                self._condition.notify_all()
            self._queue.append(me)
            while True:
                now = time.monotonic()
                if self._holder is not None and now >= self._lapses:
                    self._holder = None  # its holder never asked again
                if self._holder is None and self._queue[0] == me:
                    self._queue.popleft()
                    self._holder = me
                    self._lapses = now + self._lapse_seconds
                    return
                if self._holder is None:
                    # The next in line is waking up; look again soon.
                    self._condition.wait(TURN_LAPSES_SECONDS)
                else:
                    self._condition.wait(max(self._lapses - now, 0.0001))

    def give_up(self) -> None:
        """The caller's turn, if it holds it, goes to the next in line now (its work ended)."""
        with self._condition:
            if self._holder == threading.get_ident():
                self._holder = None
                self._condition.notify_all()

    def waiting(self) -> int:
        """How many threads wait for the turn now."""
        with self._condition:
            return len(self._queue)


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
        if _bulk.get() and not reading_under_lock():  # a commit would wait for the turn
            # A request's own long work gives up the admission place it may hold (for a
            # place of the long lane, or none) before it waits for its turn: two users'
            # initial copy pages waiting for turns held both places, and every cheap
            # request (/health too) waited for one of them to end.
            admission.running_long()
            BULK.next_turn()
        now = time.monotonic()
        _turns.due = now + TURN_SECONDS
        _turns.last = now
