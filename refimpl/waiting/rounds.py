"""One thread that works in rounds: what was handed over while it worked is its next round.

The waiting of both protocols for the disk goes through here: the flusher (`flusher.py`,
HTTP's writes: one group commit for every write asked for meanwhile) and the PostgreSQL
protocol's acknowledgements (`refimpl.pgwire.acknowledging`: answers sent once their
commits are durable). What a caller may rely on: items are handed to `run_round` in the
order they were handed over, a round at a time, on the one thread; `close` lets the thread
finish every item handed over before it, then end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Rounds(Generic[T]):
    """Hands items to `run_round` in rounds, on a thread named `name` (started by `start`,
    or at the first `hand_over`)."""

    def __init__(self, name: str, run_round: Callable[[list[T]], None]) -> None:
        self._name = name
        self._run_round = run_round
        self._condition = threading.Condition()
        self._items: list[T] = []
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._condition:
            self._start()

    def hand_over(self, item: T) -> None:
        """`item` goes into the next round."""
        with self._condition:
            self._items.append(item)
            self._start()
            self._condition.notify()

    def close(self, wait: bool = False) -> None:
        """The thread ends once every item handed over is done (`wait`: the caller waits
        for that)."""
        with self._condition:
            self._closed = True
            self._condition.notify()
            thread = self._thread
        if wait and thread is not None:
            thread.join()

    def _start(self) -> None:
        """The thread, unless it runs (the caller holds the condition)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._items and not self._closed:
                    self._condition.wait()
                if not self._items:
                    return
                items, self._items = self._items, []
            self._run_round(items)
