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
from typing import Protocol, TypeVar

from refimpl.waiting.flusher import Flushable, Flusher
from refimpl.waiting.parked import Kind, Parked, Signal
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
    when the outcome is this very object; the outcome may be an error instead."""

    answer: A


def _nothing() -> None:
    """An acknowledgement holds no place to give back."""


def acknowledge_when_durable(
    room: WaitingRoom, flusher: Flusher, database: DurableDatabase, lsn: int, answer: A
) -> Acknowledgement[A]:
    """`answer`, to be handed over once `lsn` of `database` is durable (or the log's failure)."""

    # Closures over what they need, not methods: a parked request that held its own bound
    # methods would be a reference cycle, freed only by the collector's full passes.
    def attempt(_: int) -> A | None:
        if database.log.durable_lsn >= lsn:
            return answer
        failure = flusher.failure(database)
        if failure is not None:
            raise failure
        return None

    def at_stop() -> A:
        database.wait_durable(lsn)  # stopping: the answer may wait, never precede the flush
        return answer

    # The flush's publication wakes the room; waking it now as well would only hand it the
    # interpreter lock for nothing. A flush already published (by another writer's flush)
    # is news at once.
    published = database.commits.lsn
    seen = -1 if published >= lsn else published
    parked: Acknowledgement[A] = Acknowledgement(
        # No deadline: a write's answer waits for its flush, however long.
        database.commits,
        seen,
        attempt,
        at_stop,
        math.inf,
        _nothing,
        kind=Kind.ACKNOWLEDGEMENT,
    )
    parked.answer = answer
    room.park_acknowledgement(parked)
    flusher.request(database, lsn)
    return parked
