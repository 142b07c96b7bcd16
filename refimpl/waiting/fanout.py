"""The pace of the streams' fan-out rounds, and their turns at the interpreter lock.

The waiting room (`refimpl.waiting.room`) sends the event streams their parts in fan-out
rounds. `FanoutPace` says when the next round may start, `taking_turns` lets a round's
sends share the interpreter lock with the writers' requests, and FANOUT_STRIDE moves a
round's first stream on from round to round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

# A paced request woken by its key (a stream's fan-out at a commit) waits for the next
# fan-out round (`FanoutPace`): at most MAX_FANOUT_WAIT, the bound on what pacing adds to an
# event's latency.
FANOUT_SPACING = 20
MAX_FANOUT_WAIT = 0.5
# The first stream of a round moves on by this fraction of the round at each round, so that
# no stream is always the last of a thousand to get its part.
FANOUT_STRIDE = 0.6180339887
# A fan-out round lets the interpreter lock go for TURN_PAUSE_SECONDS after each
# TURN_SECONDS of its sends (`taking_turns`): a commit waits at most about that long on it.
TURN_SECONDS = 0.002
TURN_PAUSE_SECONDS = 0.00005


class FanoutPace:
    """When the next fan-out round (the streams poked by commits) may start.

    A round's cost is its CPU time: on a busy machine its wall time is mostly time in which
    other processes ran, which the writers did not lose to it. The next round waits
    FANOUT_SPACING times that cost after the round's start, scaled by how busy the rest of
    the process was since the round before (its CPU time over the wall time, at most 1), and
    never more than MAX_FANOUT_WAIT. So while writers keep the server busy, streams take
    about a twenty-first of its time and each round carries the events of many commits; commits
    that leave the server idle go out at once, however many streams there are.

    `process_cpu` gives the CPU seconds of the whole process (all its threads).
    """

    def __init__(
        self,
        process_cpu: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.next_round = 0.0  # no round before this moment
        self._process_cpu = process_cpu
        self._clock = clock
        self._last: tuple[float, float] | None = None  # clock and process CPU at the last end

    def round(self, started: float, cost: float) -> None:
        """A round began at `started` (the clock) and cost `cost` seconds of CPU."""
        now, cpu = self._clock(), self._process_cpu()
        busy = 1.0  # the first round: nothing known of the rest, the writers come first
        if self._last is not None and now > self._last[0]:
            others = cpu - self._last[1] - cost
            busy = min(1.0, max(0.0, others) / (now - self._last[0]))
        self._last = (now, cpu)
        self.next_round = started + min(FANOUT_SPACING * cost * busy, MAX_FANOUT_WAIT)


def taking_turns(
    items: Iterable[T],
    pause: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[T]:
    """`items`, with a pause of TURN_PAUSE_SECONDS (the interpreter lock let go) after each
    TURN_SECONDS spent on them by the caller: a round's sends to a thousand streams.

    A send lets the lock go too, but only for its system call: the sending thread takes it
    back before a waiting thread is on a core, and each release only wakes the waiter to
    start its wait anew (CPython asks a holder to let go only after a switch interval
    without a release). A writer's request, or the flusher after its fsync, would so wait
    for the end of the round; a pause lets it in."""
    turn_ends = clock() + TURN_SECONDS
    for item in items:
        yield item
        if clock() >= turn_ends:
            pause(TURN_PAUSE_SECONDS)
            turn_ends = clock() + TURN_SECONDS
