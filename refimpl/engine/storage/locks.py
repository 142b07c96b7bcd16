"""A database's shared state lock: many readers of the tables, or one commit installing."""

from __future__ import annotations

import threading

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

    `installs` counts the writer's entries and exits: it is odd while a writer is inside.
    A short read of a few objects may skip the lock: it reads `installs`, reads what it
    needs if it is even, and keeps what it read only if `installs` still has that value
    afterwards (no writer was inside meanwhile, so what it read is one installed state).
    Otherwise (and if what it read raised, torn by a writer) it reads again under the lock.
    """

    def __init__(self) -> None:
        # Entered as the plain lock (in C), where the Condition's own `with` is two Python
        # calls: every commit and every read enters it; waits and wakes use the Condition.
        self._mutex = threading.Lock()
        self._condition = threading.Condition(self._mutex)
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self._asleep = 0  # readers and writers waiting on the condition: someone to wake
        self._depth = threading.local()
        self._exclusive = _Exclusive(self)
        # Moved by the writer only, under the mutex; read by lockless readers (see above).
        self.installs = 0

    def __enter__(self) -> SharedLock:
        depth = getattr(self._depth, "value", 0)
        if not depth:
            with self._mutex:
                while self._writing or self._writers_waiting:
                    admission.waiting()
                    self._asleep += 1
                    self._condition.wait()
                    self._asleep -= 1
                self._readers += 1
            _held.count = getattr(_held, "count", 0) + 1
        self._depth.value = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        depth = self._depth.value - 1
        self._depth.value = depth
        if not depth:
            _held.count -= 1
            with self._mutex:
                self._readers -= 1
                # Only a commit waits for the readers to leave (readers wait for a commit,
                # which wakes them as it ends): waking no one costs a point read 2 us.
                if not self._readers and self._writers_waiting:
                    self._condition.notify_all()

    def exclusive(self) -> _Exclusive:
        """`with lock.exclusive():` writes, alone (every commit enters it: an object made
        once, not a generator's context made at each commit)."""
        return self._exclusive

    # The writer's side takes the mutex by acquire and release, not `with`: every commit
    # enters and leaves, and a `with` makes two bound methods and an argument tuple more.

    def _enter_exclusive(self) -> None:
        mutex = self._mutex
        mutex.acquire()
        try:
            if self._writing or self._readers:  # seldom: most commits find no one inside
                self._writers_waiting += 1
                while self._writing or self._readers:
                    admission.waiting()
                    self._asleep += 1
                    self._condition.wait()
                    self._asleep -= 1
                self._writers_waiting -= 1
            self._writing = True
            self.installs += 1
        finally:
            mutex.release()

    def _exit_exclusive(self, *exc: object) -> None:
        mutex = self._mutex
        mutex.acquire()
        try:
            self.installs += 1
            self._writing = False
            # Nearly every commit finds no one waiting: notify_all would still cost 1 us.
            if self._asleep:
                self._condition.notify_all()
        finally:
            mutex.release()


class _Exclusive:
    """A SharedLock's writing side as a context manager."""

    __slots__ = ("__enter__", "__exit__")

    def __init__(self, lock: SharedLock) -> None:
        # The lock's own methods, called by `with` with no step of this object between.
        self.__enter__ = lock._enter_exclusive
        self.__exit__ = lock._exit_exclusive
