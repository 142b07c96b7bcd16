"""Waking readers that wait for the next durable commit of a database."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Protocol

log = logging.getLogger(__name__)


class CommitSignal:
    """The durable LSN as it moves, and who to tell when it does.

    Readers do not block on it: a listener (the HTTP layer's waiting room) is told after
    each advance and at `close` (shutdown: waiting readers answer with what they have), and
    decides what to re-read. Waiting costs no disk and no log reads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lsn = 0
        self._listeners: list[Callable[[], None]] = []
        self._published_at = 0.0  # time.monotonic() of the latest advance
        self.quiet_before = float("inf")  # seconds without an advance before the latest one

    @property
    def lsn(self) -> int:
        return self._lsn

    def listen(self, callback: Callable[[], None]) -> None:
        """Call `callback` (cheap, never blocking) after each advance and at `close`."""
        with self._lock:
            self._listeners.append(callback)

    def publish(self, durable_lsn: int) -> None:
        with self._lock:
            if durable_lsn <= self._lsn:
                return
            now = time.monotonic()
            self.quiet_before, self._published_at = now - self._published_at, now
            self._lsn = durable_lsn
            listeners = list(self._listeners)
        for callback in listeners:
            callback()

    def close(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for callback in listeners:
            callback()


class Waker(Protocol):
    """Anything a wake board can wake: a `threading.Event`, a parked request's poke."""

    def set(self) -> None: ...


class DurableLog(Protocol):
    """What a wake board reads of its database's log (`WriteAheadLog`)."""

    @property
    def last_lsn(self) -> int: ...

    def when_durable(self, lsn: int, call: Callable[[], object]) -> bool: ...


class WakeBoard:
    """Waiters keyed by (table, value): a commit wakes only those whose rows it touched.

    A waiter registers a Waker under `(table, value)` (value None: any change of the
    table), then checks its revision, then waits: a commit between the check and the wait
    has already set the Event (or will once the commit is durable), so none is missed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, dict[object, set[Waker]]] = {}
        self._closed = False
        self._log: DurableLog | None = None  # given by a waiter: wake-ups once durable

    def register(
        self, table: str, value: object, event: Waker, durable: DurableLog | None = None
    ) -> None:
        """`durable`: the database's log. From then on a commit wakes the board's waiters
        once it is durable (or the log failed), from the thread whose flush made it so, all
        of them in one call (`WriteAheadLog.when_durable`): the live queries' waiters, whose
        answers show only durable commits, so woken at the commit their passes would only
        wait for the flush, or lead it, on the thread that makes their user's answers."""
        with self._lock:
            if durable is not None:
                self._log = durable
            if self._closed:
                event.set()
                return
            self._waiters.setdefault(table, {}).setdefault(value, set()).add(event)

    def unregister(self, table: str, value: object, event: Waker) -> None:
        with self._lock:
            by_value = self._waiters.get(table)
            if by_value is None:
                return
            events = by_value.get(value)
            if events is not None:
                events.discard(event)
                if not events:
                    del by_value[value]
            if not by_value:
                del self._waiters[table]

    def notify(self, table: str, values: frozenset[object], everything: bool) -> None:
        if table not in self._waiters:
            # No one waits on the table (every commit of most tables): no lock taken. A
            # waiter registering meanwhile checks its revision after, which the commit
            # moved before this call: it sees the change and does not wait.
            return
        with self._lock:
            by_value = self._waiters.get(table)
            if not by_value:
                return
            if everything:
                woken = [e for events in by_value.values() for e in events]
            else:
                woken = list(by_value.get(None, ()))
                for value in values:
                    woken += by_value.get(value, ())
        log = self._log
        # Within the commit, after its append: the log's last LSN is the commit's.
        if woken and log is not None and log.when_durable(log.last_lsn, partial(_wake, woken)):
            return
        for event in woken:
            event.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            woken = [e for by_value in self._waiters.values() for s in by_value.values() for e in s]
        for event in woken:
            event.set()


def _wake(woken: list[Waker]) -> None:
    """A durable commit's wake-ups, on the thread whose flush made it durable: one waker's
    bug must neither keep the others asleep nor fail that flush's leader, whose caller
    acknowledges the flush's writes after it."""
    for event in woken:
        try:
            event.set()
        except Exception:
            log.exception("waking a waiter of a durable commit failed")
