"""The group commit's gather: a leader waits for its batch to fill, and the append that fills
it starts the flush at once.

Committers answered by the last flush append again soon after it ends; a leader that flushed
at once would take only the commits made meanwhile, and batches would alternate between two
halves of the writers. So a leader whose last flush carried several commits waits, before its
flush, until as many are pending, but no longer than a bound. It used to sleep the whole bound
(half the last flush, at most `MAX_SECONDS`) even when its batch was full from the start, or
filled early: the disk sat idle while commits waited (`tools/bench/commit_timeline.py`).

The wait is one timed acquire of a lock (C code, the interpreter lock let go once) that the
filling append releases under the log's lock: no Condition (whose timed wait makes a lock and
runs Python at every flush), and an append pays one attribute read while no one gathers.
"""

from __future__ import annotations

import threading

# The longest a leader waits for its batch to fill.
MAX_SECONDS = 0.001


class Gather:
    """A leader's wait for the append of LSN `lsn`. Both sides run under the log's lock
    (`wait` lets it go while it waits): `wait` by the one leader, `open` by the append that
    reaches `lsn`, which then reads 0 again."""

    def __init__(self) -> None:
        # Held but while a filling append has opened it and the leader has not yet taken it
        # back: a release is always of a held lock.
        self._gate = threading.Lock()
        self._gate.acquire()
        self.lsn = 0  # the LSN whose append ends the wait; 0 while no leader waits

    def wait(self, lock: threading.Lock, lsn: int, seconds: float) -> None:
        """With `lock` held by the caller and LSN `lsn` not yet appended: lets `lock` go and
        waits until `lsn` is appended (`open`) or `seconds` pass, then takes `lock` again."""
        self.lsn = lsn
        opened = False
        lock.release()
        try:
            opened = self._gate.acquire(timeout=seconds)
        finally:
            lock.acquire()
            if not opened and not self.lsn:  # opened after the timeout, before the lock
                self._gate.acquire()
            self.lsn = 0

    def open(self) -> None:
        """For the append of LSN `lsn` or later, under the log's lock, while `lsn` is set."""
        self.lsn = 0
        self._gate.release()
