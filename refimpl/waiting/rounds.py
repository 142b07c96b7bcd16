"""One thread that works in rounds: what was handed over while it worked is its next round.

The waiting of both protocols for the disk goes through here: the flusher (`flusher.py`,
HTTP's writes: one group commit for every write asked for meanwhile) and the PostgreSQL
protocol's acknowledgements (`refimpl.pgwire.acknowledging`: answers sent once their
commits are durable). What a caller may rely on: items are handed to `run_round` in the
order they were handed over, a round at a time, on the one thread; a round that raises is
logged and the thread goes on; `close` lets the thread finish every item handed over
before it, then end. A round may take the items handed over while it ran (`more`): they
are then its own, not the next round's.

Handing over is one call of a queue written in C, which wakes the thread only when it
waits: a Condition's notify and its lock's Python methods cost the handing thread about
100 Python opcodes, at every commit of both protocols.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger("refimpl.waiting")


class _Close:
    """The mark `close` hands over: every item before it is the last round."""


_CLOSE = _Close()


class Rounds(Generic[T]):
    """Hands items to `run_round` in rounds, on a thread named `name` (started by `start`,
    or at the first `hand_over`)."""

    def __init__(self, name: str, run_round: Callable[[list[T]], None]) -> None:
        self._name = name
        self._run_round = run_round
        self._handed: queue.SimpleQueue[T | _Close] = queue.SimpleQueue()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._close_taken = False  # `more` took the close's mark: the round is the last

    def start(self) -> None:
        """The thread, unless it runs already."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def hand_over(self, item: T) -> None:
        """`item` goes into the next round."""
        self._handed.put(item)
        if self._thread is None:  # once: a plain read is all a started thread costs
            self.start()

    def more(self) -> list[T]:
        """For `run_round`, on the thread: every item handed over since its round was
        taken, in order, taken now (they are no later round's); none handed over after a
        close."""
        taken: list[T] = []
        if self._close_taken:
            return taken
        take = self._handed.get_nowait
        try:
            while True:
                item = take()
                if item is _CLOSE:
                    self._close_taken = True
                    break
                taken.append(item)  # type: ignore[arg-type]  # the mark is _CLOSE alone
        except queue.Empty:
            pass
        return taken

    def close(self, wait: bool = False) -> None:
        """The thread ends once every item handed over before is done (`wait`: the caller
        waits for that). Items handed over after the close are never run."""
        self._handed.put(_CLOSE)
        thread = self._thread
        if wait and thread is not None:
            thread.join()

    def _run(self) -> None:
        """Rounds until the close: each the first item waited for and every one after it."""
        wait, take = self._handed.get, self._handed.get_nowait
        while True:
            round_ = [wait()]
            try:
                while True:
                    round_.append(take())
            except queue.Empty:
                pass
            closed = _CLOSE in round_  # in C: identity first, as the mark is only itself
            if closed:
                round_ = round_[: round_.index(_CLOSE)]
            if round_:
                try:
                    self._run_round(round_)  # type: ignore[arg-type]  # no _Close in it
                except Exception:  # the thread must live on for the rounds after it
                    log.exception("bug: a round of thread '%s' failed", self._name)
            if closed or self._close_taken:
                return
            # Not held while the next round is waited for: its items (the flusher's
            # databases) are let go at once, a dropped database's memory with them.
            del round_
