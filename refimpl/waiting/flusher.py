"""The flusher: one thread that makes databases' logs durable up to the LSNs asked for.

Writers that are answered once durable (see `refimpl.waiting.room`) ask it for their LSN
instead of waiting for the fsync in their own thread: every write asked for meanwhile
shares the flush (a round of `rounds.Rounds`; the PostgreSQL protocol's
acknowledgements wait in rounds alike, `refimpl.pgwire.acknowledging`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from refimpl.errors import WritesStopped
from refimpl.waiting.rounds import Rounds

log = logging.getLogger("refimpl.waiting")


class Flushable(Protocol):
    """A database as the flusher sees it."""

    name: str

    def wait_durable(self, lsn: int) -> None: ...


class Flusher:
    """Makes logs durable up to the LSNs asked for, in one thread of its own (`Rounds`):
    each database once a round, up to the largest LSN asked for it meanwhile."""

    def __init__(self, on_failure: Callable[[], None]) -> None:
        self._rounds: Rounds[tuple[Flushable, int]] = Rounds("kdb-flusher", self._flush)
        self._failures: dict[Flushable, WritesStopped] = {}  # databases hash by identity
        self._on_failure = on_failure

    def request(self, database: Flushable, lsn: int) -> None:
        self._rounds.hand_over((database, lsn))

    def failure(self, database: Flushable) -> WritesStopped | None:
        return self._failures.get(database)

    def close(self) -> None:
        self._rounds.close()

    def _flush(self, asked: list[tuple[Flushable, int]]) -> None:
        wanted: dict[Flushable, int] = {}  # the largest LSN asked for each
        for database, lsn in asked:
            wanted[database] = max(wanted.get(database, 0), lsn)
        for database, lsn in wanted.items():
            try:
                database.wait_durable(lsn)  # leads the group commit; wakes the room
            except WritesStopped as error:
                self._failures[database] = error
                self._on_failure()
            except Exception:  # the thread must live on; the answers wait for a later try
                log.exception("flushing the log of database '%s' failed", database.name)
