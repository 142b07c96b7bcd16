"""The admission places of the server: served in order, with a lane for costly requests.

`ADMITTED` places let that many requests run Python at once (see refimpl.engine.admission).
A request that turned out costly (it ran long, or its SQL text is large) must not keep a
place that cheap requests need: if it keeps running without a place, every such request
competes for the interpreter lock with the cheap ones, and if it keeps its place, the cheap
ones are not even polled for. So at most `long_places` places may be held by costly
requests, and a costly request waits for one of those, in order, while the other places keep
answering the cheap requests. The long places are either some of the places (fewer than all
of them) or places beside them (`apart`): a request found costly then leaves its ordinary
place to the next cheap one, and one ordinary place is enough. A server answering many short
requests in turn is best served by one: its worker finds the next ready connection without
sleeping, and never hands the interpreter lock to a second worker and waits to take it
back, as two workers running at once do at every system call of either.
"""

from __future__ import annotations

import collections
import threading

from refimpl.engine.admission import CostlyShapes


class FifoSlots:
    """A semaphore that serves waiters in order: a freed place goes to the oldest waiter.

    `threading.Semaphore` lets a thread that just gave a place back take it again before
    the waiter it woke runs; under load some requests then wait for many others' turns.

    Of the places, at most `long_places` are held by costly requests at once (`to_long`);
    the others only by requests that are still cheap, so a cheap request never queues
    behind more than the costly requests that hold those. With `apart`, the `long_places`
    are more places beside the `places`: a request moving to one gives its ordinary place on
    (at most `places` cheap and `long_places` costly requests then run at once), so a cheap
    request never queues behind a costly one at all.
    """

    def __init__(self, places: int, long_places: int = 0, apart: bool = False) -> None:
        self._apart = apart
        self._lock = threading.Lock()
        self._free = places
        self._queue: collections.deque[threading.Lock] = collections.deque()
        self._long_limit = long_places
        self._long = 0  # places held by costly requests
        # Costly requests waiting for a place; not empty only while `_long` is at the limit.
        self._long_queue: collections.deque[threading.Lock] = collections.deque()
        self.costly = CostlyShapes()  # the statement shapes that ran long lately

    def acquire(self) -> None:
        with self._lock:
            if self._free and not self._queue:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._queue.append(turn)
        turn.acquire()  # released by `release`: the place is handed over

    def release(self) -> None:
        with self._lock:
            self._give_locked()

    def _give_locked(self) -> None:
        if self._queue:
            self._queue.popleft().release()
        else:
            self._free += 1

    def to_long(self, holding: bool, timeout: float | None) -> bool:
        """A costly request's place: True once the caller holds one of the long places.

        `holding`: the caller holds an ordinary place, which becomes a long place when one
        is free (`apart`: goes to the next waiter as the caller takes a long one), else goes
        to the next waiter while the caller waits its turn among the costly requests.
        `timeout` 0 never waits: False then, and the ordinary place has been given on all
        the same (the caller may not wait: it carries on without one). A wait that times
        out also answers False, without a place.
        """
        with self._lock:
            if self._long < self._long_limit:
                if self._apart:
                    self._long += 1
                    if holding:
                        self._give_locked()
                    return True
                if holding:
                    self._long += 1
                    return True
                if self._free and not self._queue:
                    self._free -= 1
                    self._long += 1
                    return True
            if holding:
                self._give_locked()
            if timeout is not None and timeout <= 0:
                return False
            turn = threading.Lock()
            turn.acquire()
            self._long_queue.append(turn)
        if turn.acquire(timeout=-1 if timeout is None else timeout):
            return True
        with self._lock:
            try:
                self._long_queue.remove(turn)
            except ValueError:
                return True  # handed over just as the wait timed out: the place is ours
        return False

    def release_long(self) -> None:
        """A costly request gives its long place back: to the next costly one, or to all."""
        with self._lock:
            if self._long_queue:
                self._long_queue.popleft().release()
                return
            self._long -= 1
            if not self._apart:  # else its ordinary place went on at `to_long`
                self._give_locked()

    def open_all(self) -> None:
        """Every waiter, now and later, gets a place at once (the server is stopping)."""
        with self._lock:
            self._free = 1 << 30
            self._long_limit = 1 << 30
            while self._queue:
                self._queue.popleft().release()
            while self._long_queue:
                self._long += 1  # released as a long place: `release_long` counts it back
                self._long_queue.popleft().release()
