"""Answers that wait for a commit without holding a worker thread.

A reader that asks for what has not been committed yet gets a `Deferred`: the answer as
`attempt(lsn)` gives it after the first commit that brings something (`lsn`: the durable
LSN the room looks at, at least what is durable as of the attempt), or `on_timeout()` once
the wait is over. The one thread of the `WaitingRoom` decides the paced readers: at a
commit it asks each parked reader's `attempt` (readers at the same position share one
encoded answer) and hands the answers over; write acknowledgements are decided by the
thread that publishes the flush. Our server parks the connection meanwhile, so a hundred
waiting readers cost no threads and a commit wakes one thread, not a hundred; any other
WSGI server iterates the Deferred, which then waits in its own thread.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from refimpl.engine.tracking.signals import CommitSignal
from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response

log = logging.getLogger("refimpl.http")

IDLE_SECONDS = 1.0  # how often the waiting room looks at an empty schedule


ROUND_SPACING = 15  # a round starts at least this many times its sending time after the last
MAX_ROUND_WAIT = 1.0  # seconds; however long the last round took
QUIET_SECONDS = 0.1  # a commit after this long without one is answered at once


class Pace:
    """Rounds of answers for one database's waiting readers, spaced by what they cost.

    Under a steady stream of commits every reader would otherwise come back, find news and
    be answered at once, again and again, and the readers' requests would crowd out the
    writers. A round starts when the room answers parked readers; the time it takes to send
    them stands for its cost (the readers' next requests cost about twice as much again).
    Until ROUND_SPACING times that has passed since its start, readers that come back with
    news wait for the next round: news reaches them a few milliseconds later, in one answer.
    A commit that follows QUIET_SECONDS without one is no steady stream: it is answered at
    once.

    The cost is the round's wall-clock time: it includes the time the room's thread lost to
    the readers' own processes and requests, which is what the writers lose too. A round
    stalled by something else (a collection, a busy machine) would hold every reader back
    fifteen times as long, so MAX_ROUND_WAIT bounds the wait: news at least once a second
    under any load.
    """

    def __init__(self) -> None:
        self.next_round = 0.0  # no round before this moment

    def round(self, started: float, cost: float) -> None:
        """A round began at `started` (monotonic) and cost `cost` seconds to send."""
        self.next_round = started + min(ROUND_SPACING * cost, MAX_ROUND_WAIT)


class Deferred:
    """One waiting request's answer; decided exactly once."""

    def __init__(
        self,
        signal: CommitSignal,
        seen: int,
        attempt: Callable[[int], Answer | None],
        on_timeout: Callable[[], Answer],
        deadline: float,
        release: Callable[[], None],
        *,
        paced: bool = False,
    ) -> None:
        self.signal = signal
        self.paced = paced  # answered in the rounds of its database's `Pace`
        self.seen = seen  # the durable LSN the last attempt looked at
        self.attempt = attempt
        self.on_timeout = on_timeout
        self.deadline = deadline
        self._release = release
        self._lock = threading.Lock()
        self._answer: Answer | None = None
        self._callback: Callable[[Answer], None] | None = None
        self._waiter: threading.Event | None = None  # made only for a thread that waits

    def resolve(self, answer: Answer) -> None:
        with self._lock:
            if self._answer is not None:
                return
            self._answer = answer
            callback, waiter = self._callback, self._waiter
        self._release()
        if waiter is not None:
            waiter.set()
        if callback is not None:
            callback(answer)

    def wait(self) -> Answer:
        """Block until decided; the answer."""
        with self._lock:
            if self._answer is None and self._waiter is None:
                self._waiter = threading.Event()
            waiter = self._waiter
        if waiter is not None:
            waiter.wait()
        assert self._answer is not None
        return self._answer

    def on_ready(self, callback: Callable[[Answer], None]) -> None:
        """Call `callback` with the answer once there is one (at once if there is)."""
        with self._lock:
            answer = self._answer
            if answer is None:
                self._callback = callback
                return
        callback(answer)

    def __call__(self, environ: dict, start_response: Any) -> DeferredBody:
        return DeferredBody(self, start_response)


class DeferredBody:
    """The WSGI iterable of a Deferred: iterating it waits for the answer."""

    def __init__(self, deferred: Deferred, start_response: Any) -> None:
        self.deferred = deferred
        self._start_response = start_response

    def __iter__(self) -> Iterator[bytes]:
        answer = self.deferred.wait()
        self._start_response(answer.status, answer.headers)
        yield answer.body


class WaitingRoom:
    """Decides parked Deferreds at commits and deadlines, in one thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Paced readers and the rest (write acknowledgements) apart: a flush answers its
        # writers without looking at, or keeping workers behind the gate for, the readers.
        self._readers: list[Deferred] = []
        self._others: list[Deferred] = []
        # By id(signal): how many readers are parked, and the signal.
        self._reader_signals: dict[int, tuple[int, CommitSignal]] = {}
        self._deadlines: list[tuple[float, int, Deferred]] = []
        self._order = itertools.count()
        self._signals: set[int] = set()
        self._next_look = 0.0  # when the room's thread looks at the parked requests again
        self._attempt_all = False  # the next pass attempts even those without news
        self._in_round: set[int] = set()  # id(signal) of readers being answered now
        self._paces: dict[int, Pace] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        # Held while a round of answers is handed over. A server whose workers pass through
        # it before reading a request keeps a round from being interleaved with the requests
        # its first answers bring back: each such request would hold the interpreter lock
        # while later answers of the round wait.
        self.gate = threading.Lock()
        self._round = threading.local()

    def after_round(self, action: Callable[[], None]) -> None:
        """Run `action` once the current round's answers are all handed over.

        At once when not called from within a round. The server re-arms an answered
        connection this way: a reader's next request would otherwise wake a worker while the
        round is still being sent, and each such wake-up takes the interpreter lock away.
        """
        pending = getattr(self._round, "pending", None)
        if pending is None:
            action()
        else:
            pending.append(action)

    def paced(self, signal: CommitSignal) -> bool:
        """True while readers of `signal`'s database that have news wait for the next round."""
        with self._lock:
            if id(signal) in self._in_round:
                return True  # its readers are being answered: the next round has the rest
            pace = self._paces.get(id(signal))
            return _pacing(pace, signal, time.monotonic())

    def wake(self) -> None:
        """Attempt every parked request again now (something other than a commit changed)."""
        with self._lock:
            self._attempt_all = True
        self._wake.set()

    def park(self, deferred: Deferred) -> None:
        """Decide `deferred` at the next commit that brings news, or at its deadline.

        The room looks at its parked requests again only when this one needs it now: it has
        news already (a commit came after its last attempt), or its deadline is nearer than
        the room's next look. A hundred readers coming back after a round thus cost no
        hundred passes over everything parked.
        """
        with self._lock:
            closed = self._closed
            if not closed:
                wake = False
                if id(deferred.signal) not in self._signals:
                    self._signals.add(id(deferred.signal))
                    deferred.signal.listen(self._on_commit)
                    wake = True  # a commit may have come before the listener was in place
                if deferred.paced:
                    self._readers.append(deferred)
                    key = id(deferred.signal)
                    count, _ = self._reader_signals.get(key, (0, deferred.signal))
                    self._reader_signals[key] = (count + 1, deferred.signal)
                else:
                    self._others.append(deferred)
                if deferred.deadline != math.inf:
                    entry = (deferred.deadline, next(self._order), deferred)
                    heapq.heappush(self._deadlines, entry)
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="kdb-waiting-room", daemon=True
                    )
                    self._thread.start()
                wake = (
                    wake
                    or self._has_news_due(deferred)
                    or deferred.deadline < self._next_look
                )
        if closed:
            _decide(deferred, deferred.on_timeout)
        elif wake:
            self._wake.set()

    def _has_news_due(self, deferred: Deferred) -> bool:
        """True when `deferred` has news the room will not look at in time by itself."""
        if deferred.signal.lsn <= deferred.seen:
            return False
        pace = self._paces.get(id(deferred.signal)) if deferred.paced else None
        if pace is None or not _pacing(pace, deferred.signal, time.monotonic()):
            return True
        # A paced reader waits for the next round, and the room looks by then anyway.
        return self._next_look > pace.next_round

    def _on_commit(self) -> None:
        """A commit became durable: the publishing thread (mostly the flusher, which made
        it so) answers the writes it acknowledges itself; the room's thread is woken only
        for parked readers. A flush thus costs no second thread's wake-up."""
        with self._lock:
            others = list(self._others)
            readers = bool(self._readers)
        if others:
            decided: set[int] = set()
            self._answer_round(others, {}, time.monotonic(), decided, {}, False)
            if decided:
                with self._lock:
                    self._others = [d for d in self._others if id(d) not in decided]
        if readers:
            self._wake.set()

    def close(self) -> None:
        """Answer every parked request with what it has; later ones are answered at once."""
        with self._lock:
            self._closed = True
            parked = self._others + self._readers
            self._others, self._readers, self._reader_signals = [], [], {}
            self._deadlines = []
        for deferred in parked:
            _decide(deferred, deferred.on_timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                nearest = self._deadlines[0][0] if self._deadlines else None
                if self._readers and self._paces:
                    now = time.monotonic()
                    ahead = [p.next_round for p in self._paces.values() if p.next_round > now]
                    if ahead and (nearest is None or min(ahead) < nearest):
                        nearest = min(ahead)
                now = time.monotonic()
                timeout = IDLE_SECONDS if nearest is None else max(0.0, nearest - now)
                self._next_look = now + timeout
            self._wake.wait(timeout)
            self._wake.clear()
            self._decide_due()

    def _decide_due(self) -> None:
        with self._lock:
            attempt_all, self._attempt_all = self._attempt_all, False
            now = time.monotonic()
            paces = dict(self._paces)
            others = list(self._others)
            deadline_due = bool(self._deadlines) and self._deadlines[0][0] <= now
            readers_due = attempt_all or deadline_due or any(
                not _pacing(paces.get(key), signal, now)
                for key, (_, signal) in self._reader_signals.items()
            )
            readers = list(self._readers) if readers_due else []
            # Readers answered early in the round come back while it goes on; they wait
            # for the next round with the others instead of each getting (and costing) an
            # answer of its own from a position of its own.
            self._in_round = set(self._reader_signals) if readers else set()
        decided: set[int] = set()
        answered: dict[int, int] = {}  # by signal: readers given news in this round
        cost = 0.0
        pending: list[Callable[[], None]] = []
        self._round.pending = pending
        try:
            # Writers first: a writer should not wait behind a round of readers its own
            # commit woke.
            self._answer_round(others, paces, now, decided, answered, attempt_all)
            if readers:
                started = time.monotonic()
                with self.gate:
                    self._answer_round(readers, paces, now, decided, answered, attempt_all)
                cost = time.monotonic() - started
        finally:
            self._round.pending = None
            for action in pending:
                try:
                    action()
                except Exception:  # one connection's trouble must not keep the others waiting
                    log.warning("finishing an answered request failed", exc_info=True)
        with self._lock:
            self._in_round = set()
            if not decided:
                return
            for key in answered:
                self._paces.setdefault(key, Pace()).round(now, cost)
            self._others = [d for d in self._others if id(d) not in decided]
            if readers:
                kept = []
                for deferred in self._readers:
                    if id(deferred) in decided:
                        key = id(deferred.signal)
                        count, signal = self._reader_signals[key]
                        if count > 1:
                            self._reader_signals[key] = (count - 1, signal)
                        else:
                            del self._reader_signals[key]
                    else:
                        kept.append(deferred)
                self._readers = kept
                self._deadlines = [e for e in self._deadlines if id(e[2]) not in decided]
                heapq.heapify(self._deadlines)

    @staticmethod
    def _answer_round(
        parked: list[Deferred],
        paces: dict[int, Pace],
        now: float,
        decided: set[int],
        answered: dict[int, int],
        attempt_all: bool,
    ) -> None:
        # Each signal's LSN is read once per round: commits published while the round goes
        # out do not split its readers into groups with answers of their own to encode.
        round_lsns: dict[int, int] = {}
        for deferred in parked:
            key = id(deferred.signal)
            pace = paces.get(key) if deferred.paced else None
            lsn = round_lsns.get(key)
            if lsn is None:
                lsn = round_lsns[key] = deferred.signal.lsn
            news = lsn > deferred.seen or attempt_all
            if news and not _pacing(pace, deferred.signal, now):
                deferred.seen = lsn
                if _decide(deferred, functools.partial(deferred.attempt, lsn)):
                    decided.add(id(deferred))
                    if deferred.paced:
                        answered[key] = answered.get(key, 0) + 1
                    continue
            if now >= deferred.deadline:
                _decide(deferred, deferred.on_timeout)
                decided.add(id(deferred))


def _pacing(pace: Pace | None, signal: CommitSignal, now: float) -> bool:
    """True while readers with news of `signal` wait for the next round of `pace`.

    News after a quiet spell is no steady stream: it is answered at once.
    """
    return pace is not None and now < pace.next_round and signal.quiet_before < QUIET_SECONDS


def _decide(deferred: Deferred, produce: Callable[[], Answer | None]) -> bool:
    """Resolve `deferred` with what `produce` gives (an error becomes its JSON answer)."""
    try:
        answer = produce()
    except Exception as exc:  # noqa: BLE001 - a 410 or a bug: the client gets its answer
        answer = to_response(exc)
    if answer is None:
        return False
    try:
        deferred.resolve(answer)
    except Exception:  # a broken connection is the server's to close; keep deciding others
        log.warning("handing over a waiting request's answer failed", exc_info=True)
    return True
