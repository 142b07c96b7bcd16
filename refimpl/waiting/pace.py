"""The change stream's waiting readers answered in rounds (`Pace`), spaced by what a round
costs, as the waiting room (`room`) answers them."""

from __future__ import annotations

from refimpl.waiting.parked import Signal

ROUND_SPACING = 15  # a round starts at least this many times its sending time after the last
MAX_ROUND_WAIT = 1.0  # seconds; however long the last round took
QUIET_SECONDS = 0.1  # a commit after this long without one is answered at once


class Pace:
    """Rounds of answers for one database's waiting readers, spaced by what they cost.

    Under a steady stream of commits every reader would otherwise come back, find news and
    be answered at once, again and again, and the readers' requests would crowd out the
    writers. A round starts when the room answers parked readers; the time it takes to send
    them stands for its cost (the readers' next requests cost about twice as much again).
    Until ROUND_SPACING times that has passed since its start, readers that come back with
    news wait for the next round: news reaches them a few milliseconds later, in one answer.
    A commit that follows QUIET_SECONDS without one is no steady stream: it is answered at
    once.

    The cost is the round's wall-clock time: it includes the time the room's thread lost to
    the readers' own processes and requests, which is what the writers lose too. A round
    stalled by something else (a collection, a busy machine) would hold every reader back
    fifteen times as long, so MAX_ROUND_WAIT bounds the wait: news at least once a second
    under any load.
    """

    def __init__(self) -> None:
        self.next_round = 0.0  # no round before this moment

    def round(self, started: float, cost: float) -> None:
        """A round began at `started` (monotonic) and cost `cost` seconds to send."""
        self.next_round = started + min(ROUND_SPACING * cost, MAX_ROUND_WAIT)


def pacing(pace: Pace | None, signal: Signal, now: float) -> bool:
    """True while readers with news of `signal` wait for the next round of `pace`.

    News after a quiet spell is no steady stream: it is answered at once.
    """
    return pace is not None and now < pace.next_round and signal.quiet_before < QUIET_SECONDS
