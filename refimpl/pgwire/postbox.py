"""Durable answers on their way from the acknowledging thread to the server's workers.

The acknowledging thread (`refimpl.pgwire.acknowledging`) finds commits durable a round at
a time; it posts each answer here and rings once a round, and the worker the ring wakes
(an eventfd in the server's epoll set) takes every answer posted and sends them. The
acknowledging thread thus makes one system call a round, not a send and a re-arm an
answer, each of which gave the interpreter lock to a worker and waited to take it back.

What a caller may rely on: every answer posted before a ring is taken by a `take` that
begins after that ring reached the eventfd (`take` reads the eventfd first, then the
answers), so none is left behind while the eventfd is armed; each is taken once; the
answers come out in the order they were posted.
"""

from __future__ import annotations

import os
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Postbox(Generic[T]):
    """Answers posted by one thread, taken by whichever worker the ring wakes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._posted: list[T] = []
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._closed = False

    def fileno(self) -> int:
        """The eventfd to poll for reading: readable once a ring follows a post."""
        return self._fd

    def post(self, item: T) -> None:
        """`item` waits for the next `take` (`ring` wakes a taker)."""
        with self._lock:
            self._posted.append(item)

    def ring(self) -> None:
        """Make the eventfd readable: what was posted waits for a taker."""
        with self._lock:  # held: a close meanwhile cannot leave a write to a stale fd
            if self._posted and not self._closed:
                os.eventfd_write(self._fd, 1)

    def take(self) -> list[T]:
        """Every item posted so far, in order; the eventfd read back to quiet first."""
        with self._lock:
            if not self._closed:
                try:
                    os.eventfd_read(self._fd)
                except BlockingIOError:
                    pass  # nothing rang since the last read (another taker's)
            taken, self._posted = self._posted, []
        return taken

    def close(self) -> None:
        """No more rings; the eventfd is closed (what is posted can still be taken)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)
