"""Answers that acknowledge commits, sent once those commits are on disk.

A connection's session commits without waiting for its flush (`acknowledge_later`), so a
worker never blocks on an fsync: when its answer acknowledges a commit that is not durable
yet, it hands the answer here and is free for the next connection at once. One thread
waits for the flushes, in turn: the first wait of a round leads the group commit for every
answer handed over meanwhile, the others find their commits durable already; then each
answer goes back to the server to be sent. A wait that fails (the log failed) hands the
error back instead, and nothing is acknowledged. Knows no sockets. The rounds are
`refimpl.waiting.rounds`' (as HTTP's flusher's): what was handed over while the thread
worked is its next round, but for the answers whose commits the round's flush made durable
as well (committed before it began, handed over while it ran): they go back with the
round's, all in one call, so that the server wakes a worker once for them (`on_round`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from refimpl.errors import KdbError
from refimpl.waiting.rounds import Rounds

T = TypeVar("T")

log = logging.getLogger("refimpl.pgwire")

# An answer handed over: the item, the wait for its commits, and whether they are durable.
_Handed = tuple[T, Callable[[], None], Callable[[], bool]]


class Acknowledging(Generic[T]):
    """One thread that waits until handed answers may go out; `on_round(answers)` is called
    on it with a round's (item, error) pairs, every item once, in the order handed over."""

    def __init__(self, on_round: Callable[[list[tuple[T, KdbError | None]]], None]) -> None:
        """`on_round` gets a round's answers at once (the server then wakes whoever sends
        them: one wake-up a round); error is None for an item that may go out."""
        self._on_round = on_round
        self._rounds: Rounds[_Handed[T]] = Rounds("kdb-pg-ack", self._round)
        self._rounds.start()

    def hand_over(
        self, item: T, wait_durable: Callable[[], None], is_durable: Callable[[], bool]
    ) -> None:
        """`item`'s answer goes out once `wait_durable()` returned (the caller sends nothing);
        `is_durable()` tells without waiting whether it would return at once."""
        self._rounds.hand_over((item, wait_durable, is_durable))

    def close(self) -> None:
        """Every answer handed over is waited for and handed back; then the thread ends."""
        self._rounds.close(wait=True)

    def _round(self, round_: list[_Handed[T]]) -> None:
        while round_:
            answers: list[tuple[T, KdbError | None]] = []
            for item, wait_durable, _ in round_:
                try:
                    wait_durable()
                except KdbError as failed:
                    answers.append((item, failed))
                else:
                    answers.append((item, None))
            # Handed over while the flush ran: those it made durable too go back now, with
            # this round's; the rest, from the first that is not, are the next round's.
            round_ = self._rounds.more()
            durable = 0
            for item, _, is_durable in round_:
                if not is_durable():
                    break
                answers.append((item, None))
                durable += 1
            del round_[:durable]
            try:
                self._on_round(answers)
            except Exception:  # the server's sending is its own: this is a bug there
                log.exception("bug: unexpected error handing back acknowledgements")
