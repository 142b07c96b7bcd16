"""Answers that acknowledge commits, sent once those commits are on disk.

A connection's session commits without waiting for its flush (`acknowledge_later`), so a
worker never blocks on an fsync: when its answer acknowledges a commit that is not durable
yet, it hands the answer here and is free for the next connection at once. One thread
waits for the flushes, in turn: the first wait of a round leads the group commit for every
answer handed over meanwhile, the others find their commits durable already; then each
answer goes back to the server to be sent. A wait that fails (the log failed) hands the
error back instead, and nothing is acknowledged. Knows no sockets.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from refimpl.errors import KdbError

T = TypeVar("T")

log = logging.getLogger("refimpl.pgwire")


class Acknowledging(Generic[T]):
    """One thread that waits until handed answers may go out; `on_durable(item, error)`
    is called on it for each, in the order they were handed over."""

    def __init__(self, on_durable: Callable[[T, KdbError | None], None]) -> None:
        self._on_durable = on_durable
        self._condition = threading.Condition()
        self._waiting: list[tuple[T, Callable[[], None]]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kdb-pg-ack", daemon=True)
        self._thread.start()

    def hand_over(self, item: T, wait_durable: Callable[[], None]) -> None:
        """`item`'s answer goes out once `wait_durable()` returned (the caller sends nothing)."""
        with self._condition:
            self._waiting.append((item, wait_durable))
            self._condition.notify()

    def close(self) -> None:
        """Every answer handed over is waited for and handed back; then the thread ends."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._waiting and not self._closed:
                    self._condition.wait()
                if not self._waiting:
                    return
                round_, self._waiting = self._waiting, []
            for item, wait_durable in round_:
                error: KdbError | None = None
                try:
                    wait_durable()
                except KdbError as failed:
                    error = failed
                try:
                    self._on_durable(item, error)
                except Exception:  # the server's sending is its own: this is a bug there
                    log.exception("bug: unexpected error sending an acknowledgement")
