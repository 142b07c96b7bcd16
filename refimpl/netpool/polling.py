"""Worker threads over one epoll set, at most a few of them answering at once.

Only a worker that holds an admission place (`places.FifoSlots`) waits on the set, and it
keeps its place from one event to the next. Under load it thus finds the next ready
connection without blocking, and the other workers sleep on the admission queue instead of
waking for each event only to queue for the interpreter lock (each such wake-up costs
context switches and the lock's hand-overs). A request that waits (the engine calls
`admission.waiting()`) or runs long hands its place on, and another worker takes over the
polling. A connection registered one-shot (`ARMED`) is thus in one worker at a time: its
registration fires once, and its server re-arms it after the answer.

`on_event` gets the event's mask as well as the descriptor: a server that keeps a
registration edge-triggered (no re-arm a request) learns from `EPOLLRDHUP` in it that the
peer's end of the stream came, even when it came with the last bytes, in one event.

A server may let one wait take several events (`taken`): under load the next connections
are ready already, and the worker answers them in turn without another wait (a system call,
the interpreter lock let go and taken back, and the round's Python, each saved). An event
taken that the worker no longer holds a place for (its request waited) is not answered
there: `on_left` makes epoll report it again, for a worker with a place.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable

from refimpl.engine import admission
from refimpl.netpool.places import FifoSlots

# Readable, then disarmed until the answer is sent: one worker per request.
ARMED = select.EPOLLIN | select.EPOLLONESHOT
# Requests admitted to run Python at once: more would only queue for the interpreter lock.
# Costly requests hold at most all places but one, so one always answers the cheap ones.
ADMITTED = 2

log = logging.getLogger("refimpl.netpool")


class PollingWorkers:
    """`threads` workers waiting on `epoll`, `places` of them at once; the one woken calls
    `on_event(fd, mask)` itself (`mask`: the events epoll reported, as `poll` gives them).

    `on_round()` runs after every wait, with or without an event (under load too): the place
    for a server's deadlines. `stop()` ends the waits; a worker finishes the event it
    answers, and `join()` waits for that.

    `taken`: the events one wait takes at most, answered in turn while the worker holds its
    place; with more than one, `on_left(fd, mask)` gets each event taken but not answered
    (the worker's place went on, or the server stops), and must make epoll report it again
    (its registration re-armed or modified): none is lost, none is answered twice.

    `long_places`: None, costly requests hold at most all `places` but one; a number, that
    many places for costly requests beside the `places` (`FifoSlots`' `apart`), which may
    then be one.
    """

    def __init__(
        self,
        name: str,
        threads: int,
        on_event: Callable[[int, int], None],
        on_round: Callable[[], None],
        poll_seconds: float,
        places: int = ADMITTED,
        taken: int = 1,
        on_left: Callable[[int, int], None] | None = None,
        long_places: int | None = None,
    ) -> None:
        if taken > 1 and on_left is None:
            raise ValueError("several events a wait need on_left for those not answered")
        self.epoll = select.epoll()
        if long_places is None:
            self.places = FifoSlots(places, long_places=places - 1)
        else:
            self.places = FifoSlots(places, long_places, apart=True)
        self.stopping = threading.Event()
        self._on_event = on_event
        self._on_round = on_round
        self._poll_seconds = poll_seconds
        self._taken = taken
        self._on_left = on_left
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """No worker waits for an event or a place from now on."""
        self.stopping.set()
        self.places.open_all()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        places, stopping = self.places, self.stopping
        while not stopping.is_set():
            places.acquire()
            admission.admitted(places.release, places)
            try:
                while admission.holding() and not stopping.is_set():
                    self._poll_once()
            finally:
                admission.done()

    def _poll_once(self) -> None:
        try:
            events = self.epoll.poll(self._poll_seconds, self._taken)
        except OSError:  # the set was closed: the server is stopping
            return
        try:
            if events:
                # The request first: its answer does not wait for the round's look at the
                # server's deadlines (a clock read, on a thread an import may hold back).
                self._on_event(*events[0])
        except Exception:  # the server answers its own errors: this is a bug in serving
            log.exception("bug: unexpected error in a server's worker")
        if len(events) > 1:
            self._answer_more(events)
        try:
            self._on_round()
        except Exception:
            log.exception("bug: unexpected error in a server's worker")

    def _answer_more(self, events: list[tuple[int, int]]) -> None:
        """The events after the first of one wait: answered while the worker holds its
        place, each on its own (an error in one is logged, the others answered); the rest
        handed to `on_left` once it does not."""
        on_left = self._on_left
        assert on_left is not None  # `__init__` checks it
        for n in range(1, len(events)):
            if not admission.holding() or self.stopping.is_set():
                for fd, mask in events[n:]:
                    try:
                        on_left(fd, mask)
                    except Exception:
                        log.exception("bug: unexpected error in a server's worker")
                return
            try:
                self._on_event(*events[n])
            except Exception:
                log.exception("bug: unexpected error in a server's worker")
