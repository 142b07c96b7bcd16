"""Durable answers on their way from the acknowledging thread to the server's workers.

The acknowledging thread (`refimpl.pgwire.acknowledging`) finds commits durable a round at
a time; it posts a round's answers here at once, which rings once, and the worker the ring
wakes (an eventfd in the server's epoll set) takes every answer posted and sends them. The
acknowledging thread thus makes one system call a round, not a send and a re-arm an
answer, each of which gave the interpreter lock to a worker and waited to take it back.

The eventfd is polled edge-triggered (`EVENTS`): every ring is an event of its own, so
the worker it wakes neither reads the eventfd back nor re-arms it (two system calls a
round, each letting another thread take the interpreter lock). Its counter is never read:
at one ring a round it would take millions of years to fill.

What a caller may rely on: every answer posted is taken by a `take` that begins after the
event of its post's ring (the ring writes after the answers are in, under the same lock as
`take`), so none is left behind; each is taken once, also by concurrent takers (two rings
in a row may wake two workers); the answers of a take come out in the order they were
posted.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Generic, TypeVar

T = TypeVar("T")

# How the eventfd is registered in an epoll set: each ring one event, nothing to re-arm.
EVENTS = select.EPOLLIN | select.EPOLLET


class Postbox(Generic[T]):
    """Answers posted by one thread, taken by whichever worker the ring wakes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._posted: list[T] = []
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._closed = False

    def fileno(self) -> int:
        """The eventfd to poll with `EVENTS`: an event at each post of some items."""
        return self._fd

    def post(self, items: list[T]) -> None:
        """`items` wait for the next `take`, in order, and a taker is woken: one ring (an
        event for the eventfd's poller) for them all; none for no items, or once closed."""
        with self._lock:  # held: a close meanwhile cannot leave a write to a stale fd
            if items:
                self._posted += items
                if not self._closed:
                    os.eventfd_write(self._fd, 1)

    def take(self) -> list[T]:
        """Every item posted so far, in order (none when another taker took them)."""
        with self._lock:
            taken, self._posted = self._posted, []
        return taken

    def close(self) -> None:
        """No more rings; the eventfd is closed (what is posted can still be taken)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)
