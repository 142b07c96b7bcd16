"""Waking readers that wait for the next durable commit of a database."""

from __future__ import annotations

import threading


class CommitSignal:
    """The durable LSN as it moves; readers wait for it to pass a position.

    `close` wakes every waiter at once (shutdown: waiting readers answer with what they
    have). Waiting costs no disk and no log reads: a waiter only re-reads when woken.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._lsn = 0
        self._closed = False
        self.waiting = 0

    @property
    def lsn(self) -> int:
        return self._lsn

    def publish(self, durable_lsn: int) -> None:
        with self._condition:
            if durable_lsn > self._lsn:
                self._lsn = durable_lsn
                self._condition.notify_all()

    def wait_beyond(self, lsn: int, timeout: float) -> bool:
        """Wait until the durable LSN passes `lsn`; False on timeout or when closed."""
        with self._condition:
            self.waiting += 1
            try:
                self._condition.wait_for(lambda: self._lsn > lsn or self._closed, timeout)
                return self._lsn > lsn
            finally:
                self.waiting -= 1

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()
