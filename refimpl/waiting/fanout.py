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
_FADE = 0.75  # what the pace keeps of the rounds before, round by round
# The rest of the process busy up to this fraction of the time counts as idle (`FanoutPace`).
IDLE_BELOW = 0.1
# The least share of a core the pace reckons with: on a machine so busy that the server gets
# less, the wait is stretched at most 1/MIN_SHARE times, not without bound (`FanoutPace`).
MIN_SHARE = 0.25


class FanoutPace:
    """When the next fan-out round (the streams poked by commits) may start: a duty budget.

    A round's cost is its CPU time: on a busy machine its wall time is mostly time in which
    other processes ran, which the writers did not lose to it. After a round ends, the rest
    of the process may use FANOUT_SPACING times that cost before the next one starts, scaled
    by how busy the rest was since the round before (its CPU time over the CPU time it could
    have had, at most 1; up to IDLE_BELOW of it counts as idle), and never more than
    MAX_FANOUT_WAIT. So while writers keep the
    server busy, streams take about a twenty-first of its processor time, however long a
    round's wall time is, and each round carries the events of many commits; commits that
    leave the server idle go out at once, however many streams there are.

    The CPU time the process could have had: the wall time the wait lasts, times the share
    of a core the round's thread got while it was runnable (its CPU time over that plus its
    wait for a core, `waited`; at least MIN_SHARE). On a machine whose cores other processes
    also want, a second of wall time gives the writers less than a second of CPU, and the
    wait grows so.

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
        # The rounds' CPU and waits for a core, the older ones fading: one round delayed
        # once by the scheduler does not stretch the next wait by itself.
        self._cost = self._waited = 0.0

    def round(self, cost: float, waited: float = 0.0) -> None:
        """A round has just ended: it cost `cost` seconds of CPU, and its thread waited
        `waited` seconds for a core meanwhile (`thread_waited`)."""
        now, cpu = self._clock(), self._process_cpu()
        self._cost = self._cost * _FADE + cost
        self._waited = self._waited * _FADE + waited
        # The share of a core the round's thread got while runnable.
        share = self._cost / (self._cost + self._waited) if self._cost > 0 else 1.0
        share = max(share, MIN_SHARE)
        busy = 1.0  # the first round: nothing known of the rest, the writers come first
        if self._last is not None and now > self._last[0]:
            others = cpu - self._last[1] - cost
            busy = min(1.0, max(0.0, others) / (now - self._last[0]) / share)
            # A rest busy less than IDLE_BELOW of the time leaves the server idle: the next
            # commit goes out at once (a wait would only add to its latency).
            busy = max(0.0, busy - IDLE_BELOW) / (1.0 - IDLE_BELOW)
        self._last = (now, cpu)
        self.next_round = now + min(FANOUT_SPACING * cost * busy / share, MAX_FANOUT_WAIT)


def thread_waited() -> float:
    """Seconds the calling thread has spent runnable, waiting for a core (Linux's schedstat;
    0 where there is none, and the pace then takes a core as the process's own)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as file:
            return int(file.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


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
