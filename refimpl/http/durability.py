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
from typing import Any

from refimpl.http.encode import Answer
from refimpl.waiting.flusher import Flusher
from refimpl.waiting.room import Deferred, WaitingRoom

log = logging.getLogger("refimpl.http")


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
