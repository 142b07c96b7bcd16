"""Acknowledging a write once it is durable, without a thread waiting for the flush.

A write commits (logged and visible) and then must not be answered before its log record
is on disk. Instead of the request's worker waiting for the flush, the answer is parked in
the waiting room and the `Flusher`'s one thread leads the group commit: the worker is free
for the next request at once, and every write parked meanwhile shares the flush. The answer
goes out when the database's durable LSN passes the write's; if the log fails instead, the
answer is the failure.
"""

from __future__ import annotations

import math
import threading
from typing import Protocol, TypeVar

from refimpl.waiting.flusher import Flushable, Flusher
from refimpl.waiting.parked import TRANSITIONS, Kind, Parked, Signal
from refimpl.waiting.room import WaitingRoom

A = TypeVar("A")


class DurableLog(Protocol):
    @property
    def durable_lsn(self) -> int: ...


class DurableDatabase(Flushable, Protocol):
    """What acknowledging needs of a database (`refimpl.engine.storage.database.Database`)."""

    @property
    def log(self) -> DurableLog: ...

    @property
    def commits(self) -> Signal: ...


class Acknowledgement(Parked[A]):
    """A write's parked acknowledgement: `answer` once its commit is durable, the log's
    failure if it fails first (`acknowledge_when_durable`). `answer` is known from the start,
    so that a deliverer may make its bytes while the flush runs and send them once decided,
    when the outcome is this very object; the outcome may be an error instead.

    Every write makes one, so what all of them share is the class's (the kind and its
    traits, no deadline, nothing to give back) and its answers come from its methods, not
    from closures made for each: a request stores its signal, what it watches and its lock
    alone. A method read off the request is bound at that read, not kept by it, so no
    reference cycle is made (what `Parked`'s closures avoid too)."""

    # `Parked.__init__`'s stores for this kind, once: unpaced, no parts, no deadline.
    kind = Kind.ACKNOWLEDGEMENT
    paced = False
    streaming = False
    _moves = TRANSITIONS[Kind.ACKNOWLEDGEMENT]
    deadline = math.inf  # a write's answer waits for its flush, however long

    def __init__(
        self, flusher: Flusher, database: DurableDatabase, lsn: int, seen: int, answer: A
    ) -> None:
        # Not `Parked.__init__`: the kind's settings are the class's (above).
        self.signal = database.commits
        self.seen = seen
        self.answer = answer
        self._flusher = flusher
        self._database = database
        self._lsn = lsn
        self._lock = threading.Lock()

    def attempt(self, _: int) -> A | None:
        """The answer once durable; the log's failure raised; None while neither."""
        database = self._database
        if database.log.durable_lsn >= self._lsn:
            return self.answer
        failure = self._flusher.failure(database)
        if failure is not None:
            raise failure
        return None

    def on_timeout(self) -> A:
        """At the room's close (it has no deadline): the answer may wait, never precede the
        flush."""
        self._database.wait_durable(self._lsn)
        return self.answer

    at_close = on_timeout

    def _release(self) -> None:
        """An acknowledgement holds no place to give back."""


def acknowledge_when_durable(
    room: WaitingRoom, flusher: Flusher, database: DurableDatabase, lsn: int, answer: A
) -> Acknowledgement[A]:
    """`answer`, to be handed over once `lsn` of `database` is durable (or the log's failure)."""
    # The flush's publication wakes the room; waking it now as well would only hand it the
    # interpreter lock for nothing. A flush already published (by another writer's flush)
    # is news at once.
    published = database.commits.lsn
    parked = Acknowledgement(flusher, database, lsn, -1 if published >= lsn else published, answer)
    room.park_acknowledgement(parked)
    flusher.request(database, lsn)
    return parked
