"""The flusher: one thread that makes databases' logs durable up to the LSNs asked for.

Writers that are answered once durable (see `refimpl.waiting.room`) ask it for their LSN
instead of waiting for the fsync in their own thread: every write asked for meanwhile
shares the flush.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from refimpl.errors import WritesStopped

log = logging.getLogger("refimpl.waiting")


class Flushable(Protocol):
    """A database as the flusher sees it."""

    name: str

    def wait_durable(self, lsn: int) -> None: ...


class Flusher:
    """Makes logs durable up to the LSNs asked for, in one thread of its own."""

    def __init__(self, on_failure: Callable[[], None]) -> None:
        self._condition = threading.Condition()
        self._wanted: dict[int, tuple[Flushable, int]] = {}  # by id(database): (database, lsn)
        self._failures: dict[int, WritesStopped] = {}
        self._on_failure = on_failure
        self._closed = False
        self._thread: threading.Thread | None = None

    def request(self, database: Flushable, lsn: int) -> None:
        with self._condition:
            key = id(database)
            _, wanted = self._wanted.get(key, (database, 0))
            self._wanted[key] = (database, max(wanted, lsn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kdb-flusher", daemon=True)
                self._thread.start()
            self._condition.notify()

    def failure(self, database: Flushable) -> WritesStopped | None:
        return self._failures.get(id(database))

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._wanted and not self._closed:
                    self._condition.wait()
                if not self._wanted:
                    return
                wanted, self._wanted = self._wanted, {}
            for key, (database, lsn) in wanted.items():
                try:
                    database.wait_durable(lsn)  # leads the group commit; wakes the room
                except WritesStopped as error:
                    self._failures[key] = error
                    self._on_failure()
                except Exception:  # the thread must live on; the answers wait for a later try
                    log.exception("flushing the log of database '%s' failed", database.name)
