"""The pace of the streams' fan-out rounds, and their turns at the interpreter lock.

The waiting room (`refimpl.waiting.room`) sends the event streams their parts in fan-out
rounds. `FanoutPace` says when the next round may start, `taking_turns` lets a round's
sends share the interpreter lock with the writers' requests, and FANOUT_STRIDE moves a
round's first stream on from round to round. `SharedSends` is the room's part that hands
one part to many streams' clients at once, through the deliverer's sends.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from refimpl.waiting.parked import A, Batch, Parked

T = TypeVar("T")

# A deliverer's send of one part to many outlets (`SharedSends.send_shared`): the outlets
# are its own handles on its clients (opaque to the room, so Any), the answer the room's own.
SharedSend = Callable[[Iterable[Any], A, Callable[[Any], None]], None]
# Its send of parts that end alike (`SharedSends.send_headed`): (outlet, head) pairs, the end.
HeadedSend = Callable[[Iterable[tuple[Any, bytes]], bytes], None]

# While writers queue, the next fan-out round waits until the rest of the process has used
# FANOUT_SPACING times the last round's CPU time (`FanoutPace`), at most MAX_FANOUT_WAIT
# after the round's end: the bound on what pacing adds to an event's latency.
FANOUT_SPACING = 20
MAX_FANOUT_WAIT = 0.5
# After a round that left streams behind (a shared part stopped at its budget, more ready),
# the cap bounds no event's latency: those streams wait for the rounds after it anyway. Past
# MAX_FANOUT_WAIT by the clock, the next round then waits on for the CPU time still owed
# (as long as the rest of the process is busy, BUSY_SHARE), up to MAX_BEHIND_WAIT, so that
# the streams keep to their share while writers want the processor. With 1,000 streams such
# a round (a 249 KB part each) cost 55-72 ms of CPU: capped at 0.5 s, the rounds took 9-12%
# of the server's processor instead of 1/21 (tools/bench/stream.py --throughput-only
# --server-timing). Writers that queue for the disk leave the process idle: the cap holds.
MAX_BEHIND_WAIT = 2.0
# Past the spacing by the clock, the wait goes on for CPU time still owed only while the rest
# of the process uses at least this share of a core: writers that wait for the disk, not
# the processor, gain nothing from streams held back.
BUSY_SHARE = 0.1
# The first stream of a round moves on by this fraction of the round at each round, so that
# no stream is always the last of a thousand to get its part.
FANOUT_STRIDE = 0.6180339887
# A fan-out round lets the interpreter lock go for TURN_PAUSE_SECONDS after each
# TURN_SECONDS of its sends (`taking_turns`): a commit waits at most about that long on it.
TURN_SECONDS = 0.002
TURN_PAUSE_SECONDS = 0.00005
# While writers queue (`FanoutPace.writers_queue`), a part many event streams share goes out
# in shorter turns (`SharedSends.send_shared`): its round is then the long one (a thousand
# sends of a part of hundreds of commits, 50 to 100 ms), and each commit needs the lock
# several times (its request, its flush, its answer). With 1,000 streams and 4 writers,
# readers off the server's core, flushes during such rounds went at 0.62, 0.48 and 0.79 of
# the rate between them in three runs, against 0.37, 0.42 and 0.49 with TURN_SECONDS
# (tools/bench/stream.py's writers and readers, load 10-18). Otherwise a round's pauses only
# delay its events (on a busy machine a pause may last a scheduler's slice), so TURN_SECONDS.
SHARED_TURN_SECONDS = 0.0005
# A headed round (a live query's streams woken by one commit, `SharedSends.send_headed`) wakes
# a client at each send, and where the clients share the server's processors they take it off
# the processor again and again: by the clock, a hundred streams' sends (about 2 ms of the
# thread's CPU time) took 5 ms and more, and paused 1.3 to 1.5 times a commit, each pause a
# sleep that lasted 0.13 ms at the median and 2 ms at the 90th percentile on a loaded machine
# (tools/bench/subscribe.py --phases 100 --per-symbol 100 --stream), every later stream of
# the round waiting for it. Its turns are so counted in the thread's own CPU time.
HEADED_TURNS_RAN = time.thread_time


class QueuedWriters(Protocol):
    """Where writers queue: a database's log (`WriteAheadLog.queued_appends`)."""

    @property
    def queued_appends(self) -> int:
        """Commits so far that found an earlier one still waiting for its flush (rising)."""
        ...


class FanoutPace:
    """When the next fan-out round (the streams poked by commits) may start: at once,
    unless writers queue.

    What waits decides, not how busy the server looks: the logs `watch`ed count the commits
    that found another still waiting for its flush (the group commit). A round at whose end
    that count has not moved since the round before (no commit queued behind another
    meanwhile) lets the next round start at once: commits that do not crowd each other,
    however many a second, go out as soon as they are durable, whatever the machine's load.
    When it moved, writers queue: the next round waits FANOUT_SPACING times the round's CPU
    time from its end, and on until the rest of the process has used that much CPU time
    since then (on a machine whose cores other programs also want, wall time gives the
    writers less) as long as it uses at least BUSY_SHARE of a core, never more than
    MAX_FANOUT_WAIT after the end (MAX_BEHIND_WAIT after a round that left streams behind,
    past MAX_FANOUT_WAIT only while the rest is busy).
    While writers queue, the streams so take about 1/(FANOUT_SPACING + 1) of the server's
    processor time, and each round carries the events of many commits.

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
        self._lock = threading.Lock()  # `watch` comes from the threads that open streams
        self._watched: weakref.WeakSet[QueuedWriters] = weakref.WeakSet()  # a closed one goes
        self._queued = 0  # the watched logs' count at the last round's end
        self._ended = 0.0  # the clock at the last round's end
        self._cpu_at_end = 0.0  # process CPU then
        self._wanted = 0.0  # CPU seconds the rest may use before the next round
        self._latest = 0.0  # the next round starts by then, whatever was used

    def watch(self, writers: QueuedWriters) -> None:
        """Count the commits that queue in `writers` (a database's log with streams)."""
        with self._lock:
            self._watched.add(writers)

    def queued(self) -> int:
        """The watched logs' count of commits that queued, so far."""
        with self._lock:
            return sum(writers.queued_appends for writers in self._watched)

    def round(self, cost: float, behind: bool = False) -> None:
        """A round has just ended: it cost `cost` seconds of CPU; `behind`: it left streams
        with more ready than it sent them (a part stopped at its budget)."""
        now, queued = self._clock(), self.queued()
        waits = queued != self._queued  # (a log that closed and went lowers it: once)
        self._queued = queued
        self._ended, self._cpu_at_end = now, self._process_cpu()
        self._wanted = FANOUT_SPACING * cost if waits else 0.0
        self._latest = now + (MAX_BEHIND_WAIT if behind else MAX_FANOUT_WAIT)
        self.next_round = now + min(self._wanted, MAX_FANOUT_WAIT)

    @property
    def writers_queue(self) -> bool:
        """Whether commits queued behind one another during the last round (the next one
        then waits for them)."""
        return self._wanted > 0.0

    def due(self, now: float) -> bool:
        """Whether a round may start at `now` (monotonic). Not yet: `next_round` says when to
        ask again (the rest of the process has not used its CPU time yet)."""
        if now < self.next_round:
            return False
        if now >= self._latest or self._wanted <= 0.0:
            return True
        used = self._process_cpu() - self._cpu_at_end
        left = self._wanted - used
        if left <= 0.0 or used < BUSY_SHARE * (now - self._ended):
            return True
        # At best the rest gets a whole core from now on: ask again once it could have.
        self.next_round = min(now + left, self._latest)
        return False


def split_batches(requests: list[Parked[A]], batches: dict[Batch, None]) -> list[Parked[A]]:
    """Adds the batches that send parts of `requests` (`Parked.batch`) to `batches`, each
    once in the order first found, and gives the requests that no batch sends, in order.
    A database's streams all in one group (mostly) cost one set comprehension, the fewest
    steps a stream (11 ns a stream against 40 for the loop, 47 for `dict.fromkeys` of an
    `attrgetter` map): a round of a thousand."""
    found = {parked.batch for parked in requests}
    if len(found) == 1 and (only := next(iter(found))) is not None:
        batches[only] = None
        return []
    alone: list[Parked[A]] = []
    for parked in requests:
        batch = parked.batch
        if batch is None:
            alone.append(parked)
        else:
            batches[batch] = None
    return alone


def taking_turns(
    items: Iterable[T],
    pause: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    turn: float = TURN_SECONDS,
    ran: Callable[[], float] | None = None,
) -> Iterator[T]:
    """`items`, with a pause of TURN_PAUSE_SECONDS (the interpreter lock let go) after each
    `turn` seconds spent on them by the caller: a round's sends to a thousand streams.
    `ran`: the calling thread's CPU time (`time.thread_time`); with it, a pause comes only
    after `turn` seconds of both clocks, the thread's time off the processor not counted.

    A send lets the lock go too, but only for its system call: the sending thread takes it
    back before a waiting thread is on a core, and each release only wakes the waiter to
    start its wait anew (CPython asks a holder to let go only after a switch interval
    without a release). A writer's request, or the flusher after its fsync, would so wait
    for the end of the round; a pause lets it in. While the sending thread is off the
    processor (another program's turn: the streams' own clients, on a shared machine) it
    sends nothing, so a waiter's wait runs out, it asks for the lock, and gets it as soon as
    the thread is back: only the thread's running time can keep a waiter out."""
    turn_ends = clock() + turn
    ran_ends = 0.0 if ran is None else ran() + turn
    for item in items:
        yield item
        if clock() >= turn_ends:
            if ran is not None:
                # Read once a turn of the clock, not once an item (a system call).
                short = ran_ends - ran()
                if short > 0.0:
                    turn_ends = clock() + short
                    continue
            pause(TURN_PAUSE_SECONDS)
            turn_ends = clock() + turn
            if ran is not None:
                ran_ends = ran() + turn


class SharedSends(Generic[A]):
    """The waiting room's sends of one part to many streams' clients at once, through the
    deliverer's own (`share_with`; until then, none)."""

    _shared_send: SharedSend[A] | None = None
    _headed_send: HeadedSend | None = None
    _fanout_pace: FanoutPace  # the room's

    def share_with(self, send: SharedSend[A], headed: HeadedSend | None = None) -> None:
        """The deliverer's ways to hand one part to many outlets at once (`send_shared`),
        and parts that end alike, each with a head of its own (`send_headed`)."""
        self._shared_send = send
        self._headed_send = headed

    @property
    def sends_headed(self) -> bool:
        """Whether `send_headed` can be used."""
        return self._headed_send is not None

    def send_headed(self, parts: Iterable[tuple[object, bytes]], body: bytes) -> None:
        """Hand each stream of `parts` (its `Parked.outlet`, a head of its own) the part
        `head + body`, `body` sent from one buffer for all, taking turns of the sending
        thread's CPU time (HEADED_TURNS_RAN); each stream is told `drained` once its part
        went out whole, as after a part of its own."""
        assert self._headed_send is not None, "no deliverer sends headed parts (share_with)"
        self._headed_send(taking_turns(parts, ran=HEADED_TURNS_RAN), body)

    @property
    def sends_shared(self) -> bool:
        """Whether `send_shared` can be used (a deliverer gave its way with `share_with`)."""
        return self._shared_send is not None

    def send_shared(
        self, outlets: Iterable[object], answer: A, on_backlog: Callable[[object], None]
    ) -> None:
        """Hand `answer` as one part to the clients of `outlets` (`Parked.outlet`s of streams
        whose parts went out so far): one answer, its bytes made once. For an outlet whose
        client does not take it whole, `on_backlog(outlet)` is called before the part can be
        drained (the rest goes out later, as a part of its own would). While writers
        queue, in turns of SHARED_TURN_SECONDS: their commits go on during the round."""
        assert self._shared_send is not None, "no deliverer shares its sends (share_with)"
        turn = SHARED_TURN_SECONDS if self._fanout_pace.writers_queue else TURN_SECONDS
        self._shared_send(taking_turns(outlets, turn=turn), answer, on_backlog)
