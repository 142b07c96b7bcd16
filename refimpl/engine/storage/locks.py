"""A database's shared state lock: many readers of the tables, or one commit installing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from refimpl.engine import admission

_held = threading.local()  # how many shared locks the thread is inside, as a reader


def reading_under_lock() -> bool:
    """True while the calling thread is inside any `SharedLock` as a reader: work that would
    wait for something else (a turn of long work) must not, since a commit waits for it."""
    return getattr(_held, "count", 0) > 0


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
            _held.count = getattr(_held, "count", 0) + 1
        self._depth.value = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        depth = self._depth.value - 1
        self._depth.value = depth
        if not depth:
            _held.count -= 1
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
