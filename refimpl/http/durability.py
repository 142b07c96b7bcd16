"""Acknowledging a write once it is durable, without a thread waiting for the flush.

An `/exec` write commits (logged and visible) and then must not be answered before the
log is on disk. Instead of the request's worker waiting for the flush, the answer is
parked in the waiting room and the `Flusher`'s one thread leads the group commit: the
worker is free for the next request at once, and every write parked meanwhile shares the
flush. The answer goes out when the database's durable LSN passes the write's; if the log
fails instead, the answer is the failure.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from refimpl.errors import WritesStopped
from refimpl.http.deferred import Deferred, WaitingRoom
from refimpl.http.encode import Answer

log = logging.getLogger("refimpl.http")


class Flusher:
    """Makes logs durable up to the LSNs asked for, in one thread of its own."""

    def __init__(self, on_failure: Callable[[], None]) -> None:
        self._condition = threading.Condition()
        self._wanted: dict[int, tuple[Any, int]] = {}  # by id(database): (database, lsn)
        self._failures: dict[int, WritesStopped] = {}
        self._on_failure = on_failure
        self._closed = False
        self._thread: threading.Thread | None = None

    def request(self, database: Any, lsn: int) -> None:
        with self._condition:
            key = id(database)
            _, wanted = self._wanted.get(key, (database, 0))
            self._wanted[key] = (database, max(wanted, lsn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kdb-flusher", daemon=True)
                self._thread.start()
            self._condition.notify()

    def failure(self, database: Any) -> WritesStopped | None:
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


def acknowledge_when_durable(
    room: WaitingRoom, flusher: Flusher, database: Any, lsn: int, answer: Answer
) -> Deferred:
    """`answer`, to be sent once `lsn` of `database` is durable (or the log's failure)."""

    def attempt(_: int) -> Answer | None:
        if database.log.durable_lsn >= lsn:
            return answer
        failure = flusher.failure(database)
        if failure is not None:
            raise failure
        return None

    def at_stop() -> Answer:
        database.wait_durable(lsn)  # stopping: the answer may wait, never precede the flush
        return answer

    # The flush's publication wakes the room; waking it now as well would only hand it the
    # interpreter lock for nothing. A flush already published (by another writer's flush)
    # is news at once.
    published = database.commits.lsn
    seen = -1 if published >= lsn else published
    deferred = Deferred(
        # No deadline: a write's answer waits for its flush, however long.
        database.commits, seen, attempt, at_stop, math.inf, lambda: None, paced=False,
    )
    room.park(deferred)
    flusher.request(database, lsn)
    return deferred
