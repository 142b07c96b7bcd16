"""Waking readers that wait for the next durable commit of a database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from refimpl.engine import admission


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


class WakeBoard:
    """Waiters keyed by (table, value): a commit wakes only those whose rows it touched.

    A waiter registers an Event under `(table, value)` (value None: any change of the
    table), then checks its revision, then waits: a commit between the check and the wait
    has already set the Event, so none is missed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, dict[object, set[threading.Event]]] = {}
        self._closed = False

    def register(self, table: str, value: object, event: threading.Event) -> None:
        with self._lock:
            if self._closed:
                event.set()
                return
            self._waiters.setdefault(table, {}).setdefault(value, set()).add(event)

    def unregister(self, table: str, value: object, event: threading.Event) -> None:
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
        for event in woken:
            event.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            woken = [e for by_value in self._waiters.values() for s in by_value.values() for e in s]
        for event in woken:
            event.set()


class SharedLock:
    """Many readers or one writer: `with lock:` reads, `with lock.exclusive():` writes.

    Readers of the tables do not wait for each other (a mutex would make point reads queue
    behind a long scan); a commit installing its changes waits for the readers inside and
    keeps new ones out until it is done. A thread may nest reads.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self._depth = threading.local()

    def __enter__(self) -> SharedLock:
        depth = getattr(self._depth, "value", 0)
        if not depth:
            with self._condition:
                while self._writing or self._writers_waiting:
                    admission.waiting()
                    self._condition.wait()
                self._readers += 1
        self._depth.value = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        depth = self._depth.value - 1
        self._depth.value = depth
        if not depth:
            with self._condition:
                self._readers -= 1
                if not self._readers:
                    self._condition.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._writers_waiting += 1
            while self._writing or self._readers:
                admission.waiting()
                self._condition.wait()
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()
