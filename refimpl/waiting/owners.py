"""Waiters' own work on their owner's budget: a small pool of threads shared fairly by user.

A parked request whose answer costs work of its client's choosing (a `where=` filter, an
ordered window's re-run, an initial copy's page) must not make that work the waiting
room's: every other user's streams and long polls wait for the room's one thread. Such a
request's `attempt` is `Offloaded`: the room's call hands the real attempt to this pool and
returns at once (nothing yet); a pool thread runs it within the owner's budget (the budget
the protocol layer gives: the statement timeout's deadline) and asks the room to attempt
the request again (`WaitingRoom.redo`), and that attempt hands over what the work made, or
the error it raised (the room's `on_error` makes it the request's answer). A request whose
deadline comes while a piece of its work runs waits for that piece (`at_deadline`): its
answer then says what the work found, or that it ran past its budget, never that nothing
came while the work was still looking.

Fair shares: at most `per_owner` pieces of one owner's work run at once, however many of
its requests wait; the others of that owner queue behind them. A thread is started whenever
an owner's piece could run and no thread is free, up to `threads`: so an owner with nothing
of its own running is served at once, whatever other owners keep queued, until `threads`
owners' work runs at once; past that, owners take turns at the threads that come free, in
the order their work came. (With two threads, two users' costly filters kept a third's
cheap one waiting for up to the statement timeout.) Threads that found no work for
`idle_seconds` end. One user's costly filters thus hold at most its share of the pool,
and never the room; and the pieces running at once share the interpreter in turns
(`refimpl.engine.query.deadlines.make_way`, since the budget is bulk work), so more threads
add no more competition for it to other requests.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import Any, Generic

from refimpl.waiting.parked import A, Parked, Part

POOL_THREADS = 64  # at most this many owners' work runs at once
PER_OWNER = 1  # pieces of one owner's work running at once
IDLE_SECONDS = 30.0  # a pool thread that found no work this long ends
log = logging.getLogger("refimpl.waiting")

Budget = Callable[[], AbstractContextManager[object]]


class OwnerPool:
    """Threads running jobs by owner, at most `per_owner` of one owner's at once: a job that
    may run starts at once on a free or new thread while fewer than `threads` run; past
    that, owners take turns in the order their work came. Threads idle for `idle_seconds`
    end."""

    def __init__(
        self,
        threads: int = POOL_THREADS,
        per_owner: int = PER_OWNER,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self._threads = threads
        self._per_owner = per_owner
        self._idle_seconds = idle_seconds
        self._lock = threading.Condition()
        self._queued: OrderedDict[Hashable, deque[Callable[[], None]]] = OrderedDict()
        self._running: dict[Hashable, int] = {}
        self._alive = 0  # threads of the pool
        self._idle = 0  # of them, those that look for a job (none taken yet, or done)
        self._named = 0  # threads ever started: each one's name
        self._closed = False
        # A protocol layer's batch of each owner's jobs (opaque here: HTTP's woken live
        # queries), kept as long as the pool: a few objects a user.
        self.batches: dict[Hashable, Any] = {}

    def submit(self, owner: Hashable, job: Callable[[], None]) -> None:
        """Run `job` on a pool thread within `owner`'s share (after its earlier jobs)."""
        with self._lock:
            if self._closed:
                return
            self._queued.setdefault(owner, deque()).append(job)
            # Idle threads take what may run; a thread more only for what they cannot.
            if self._alive < self._threads and self._startable() > self._idle:
                self._alive += 1
                self._idle += 1  # until it takes its first job
                self._named += 1
                name = f"kdb-owner-work-{self._named}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
            self._lock.notify()

    def threads(self) -> int:
        """How many threads the pool has now."""
        with self._lock:
            return self._alive

    def running(self, owner: Hashable) -> int:
        """How many of `owner`'s jobs run now."""
        with self._lock:
            return self._running.get(owner, 0)

    def close(self) -> None:
        """Queued jobs are dropped; running ones finish; the threads end."""
        with self._lock:
            self._closed = True
            self._queued.clear()
            self._lock.notify_all()

    def _startable(self) -> int:
        """How many queued jobs could start now, each owner within its share (the caller
        holds the lock)."""
        return sum(
            min(len(jobs), self._per_owner - self._running.get(owner, 0))
            for owner, jobs in self._queued.items()
        )

    def _next(self) -> tuple[Hashable, Callable[[], None]] | None:
        """The first queued job of an owner under its share (the caller holds the lock)."""
        for owner, jobs in self._queued.items():
            if self._running.get(owner, 0) < self._per_owner:
                job = jobs.popleft()
                if jobs:
                    self._queued.move_to_end(owner)  # the others' turn first
                else:
                    del self._queued[owner]
                self._running[owner] = self._running.get(owner, 0) + 1
                return owner, job
        return None

    def _work(self) -> None:
        while True:
            with self._lock:
                found = self._next()
                while found is None:
                    woken = not self._closed and self._lock.wait(self._idle_seconds)
                    found = None if self._closed else self._next()
                    if found is None and not woken:
                        # Closed, or no work for a while: its memory goes back.
                        self._idle -= 1
                        self._alive -= 1
                        return
                self._idle -= 1
            owner, job = found
            try:
                job()
            except Exception:
                # A job's bug costs that job only: were the thread to end here, the pool
                # would still count it idle and never start one for the jobs that follow.
                log.exception("a job of the waiters' pool failed")
            finally:
                with self._lock:
                    left = self._running[owner] - 1
                    if left:
                        self._running[owner] = left
                    else:
                        del self._running[owner]
                    self._idle += 1
                    self._lock.notify()


class Offloaded(Generic[A]):
    """A parked request's `attempt` whose work runs on the `OwnerPool` (see the module
    docstring). `bind` it to its request before the room may attempt it; one piece of its
    work runs at a time, and news meanwhile makes it run again once that one is done."""

    def __init__(
        self,
        pool: OwnerPool,
        redo: Callable[[Parked[A]], None],
        owner: Hashable,
        budget: Budget,
        attempt: Callable[[int], A | Part[A] | None],
    ) -> None:
        self._pool = pool
        self._redo = redo
        self._owner = owner
        self._budget = budget
        self._attempt = attempt
        self._lock = threading.Lock()
        self._parked: Parked[A] | None = None
        # What the last piece of work made, not yet taken; None (no answer) is never kept.
        self._outcome: A | Part[A] | None = None
        self._error: Exception | None = None
        self._working = False
        self._again = False
        # Set at the request's deadline while a piece runs: what it answers if the piece
        # makes nothing; then no further piece starts.
        self._fallback: Callable[[], A] | None = None

    def bind(self, parked: Parked[A]) -> None:
        self._parked = parked

    def at_deadline(self, fallback: Callable[[], A]) -> A | Part[A] | None:
        """The request's deadline came: what the last piece made and was not yet taken (its
        error raised); else, while a piece runs or waits for its thread, None: the request
        waits for it (its budget bounds it, the caller keeps the request parked with no
        deadline), and the room's attempt after it gives what it made, its error, or
        `fallback()` when it made nothing, and starts no other; else `fallback()`."""
        with self._lock:
            pending = self._error is None and self._outcome is None
            if pending and self._working:
                self._fallback = fallback
                return None
        return fallback() if pending else self(0)  # what the last piece made, or its error

    def __call__(self, lsn: int) -> A | Part[A] | None:
        """What the last piece of work made (once), or None after starting one."""
        with self._lock:
            error, self._error = self._error, None
            if error is not None:
                raise error
            if self._outcome is not None:
                outcome, self._outcome = self._outcome, None
                return outcome
            if self._working:
                self._again = True
                return None
            fallback = self._fallback
            if fallback is None:
                self._working = True
        if fallback is not None:
            return fallback()  # past its deadline, its last piece made nothing
        self._pool.submit(self._owner, lambda: self._run(lsn))
        return None

    def _run(self, lsn: int) -> None:
        parked = self._parked
        if parked is not None and parked.finished:
            with self._lock:
                self._working = False
            return
        outcome: A | Part[A] | None = None
        error: Exception | None = None
        try:
            with self._budget():
                outcome = self._attempt(lsn)
        except Exception as exc:  # noqa: BLE001 - handed to the room, which answers it
            error = exc
        with self._lock:
            self._working = False
            again, self._again = self._again, False
            if error is not None:
                self._error = error
            elif outcome is not None:
                self._outcome = outcome
            ready = error is not None or outcome is not None or self._fallback is not None
        if (ready or again) and parked is not None:
            self._redo(parked)
