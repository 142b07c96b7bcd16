"""The waiting room: decides parked requests at commits, wake-ups and deadlines.

Read `refimpl.waiting.parked` first: it says what a parked request is, its states and who
moves it. This module is the one thread that moves most of them. Paced readers (the change
stream's waiting readers) are answered in rounds spaced by what a round costs (`Pace`);
write acknowledgements are answered by the thread that publishes the flush; requests woken
by their key (live queries) are attempted when poked, the paced ones among them (event
streams at a commit) in fan-out rounds that go at once unless writers queue, and are then
spaced by the CPU time a round costs (`refimpl.waiting.fanout`: `FanoutPace`, at most
MAX_FANOUT_WAIT apart; a round lets the interpreter lock go every few milliseconds of its
sends, `taking_turns`, so that a commit never waits for a whole round), a batch of
streams that share their parts (`Parked.batch`) once for all its members, its part handed to
all of their clients at once by the deliverer's shared send (`send_shared`); every request
is answered at its deadline with what it has, and all of them at `close`.

Answers are opaque: the room hands over what `attempt` and `on_timeout` give, and turns an
exception into an answer with the `on_error` its owner gives it (the HTTP layer: a JSON
error answer).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic

from refimpl.waiting.fanout import (
    FANOUT_STRIDE,
    FanoutPace,
    QueuedWriters,
    SharedSends,
    split_batches,
    taking_turns,
)
from refimpl.waiting.owners import Budget, Offloaded, OwnerPool
from refimpl.waiting.pace import Pace, pacing
from refimpl.waiting.parked import A, Batch, Parked, Part, Signal
from refimpl.waiting.places import FairPlaces

log = logging.getLogger("refimpl.waiting")


EMPTY_LOOK_SECONDS = 1.0  # how often the room looks when nothing parked has a deadline


class WaitingRoom(SharedSends[A], Generic[A]):
    """Decides parked requests at commits, wake-ups and deadlines, in one thread of its own.

    `on_error` turns an exception raised while deciding into the request's answer;
    `fanout_pace` spaces the streams' fan-out rounds (by default by the writers that queue in
    the logs given to `watch_writers`, and this process's CPU time).
    """

    def __init__(
        self, on_error: Callable[[Exception], A], fanout_pace: FanoutPace | None = None
    ) -> None:
        self._on_error = on_error
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Paced readers and the rest (write acknowledgements) apart: a flush answers its
        # writers without looking at, or keeping workers behind the gate for, the readers.
        self._readers: list[Parked[A]] = []
        self._others: list[Parked[A]] = []
        # Signals, parked requests and batches are hashed by identity: the sets and maps hold them.
        # By signal: how many readers are parked on it.
        self._reader_signals: dict[Signal, int] = {}
        self._deadlines: list[tuple[float, int, Parked[A]]] = []
        self._order = itertools.count()
        self._signals: set[Signal] = set()  # listened to
        self._next_look = 0.0  # when the room's thread looks at the parked requests again
        self._attempt_all = False  # the next pass attempts even those without news
        self._in_round: set[Signal] = set()  # of readers being answered now
        self._paces: dict[Signal, Pace] = {}
        # Requests woken by their key (no signal), in the order parked: tried when poked or due.
        self._keyed: dict[Parked[A], None] = {}
        self._poked: list[Parked[A]] = []
        # Paced ones poked (once each: a stream poked by three commits is attempted once),
        # waiting for the next fan-out round (`_fanout_pace`).
        self._fanout: dict[Parked[A], None] = {}
        # Lists given to `poke_all` (a list poked by three commits counts once: the same
        # list object), kept whole until that round: a thousand streams poked at each commit
        # cost nothing each. A few lists (one per database with streams).
        self._fanout_groups: list[list[Parked[A]]] = []
        # Batches (streams sharing their parts) with more ready: run again in the next round.
        self._fanout_batches: dict[Batch, None] = {}
        # The deliverer's way to hand one part to many outlets at once (`share_with`).
        self._fanout_pace = fanout_pace or FanoutPace()
        self._fanout_rounds = 0  # rounds so far: where the next one starts (FANOUT_STRIDE)
        self._keyed_deadlines: list[tuple[float, int, Parked[A]]] = []
        # Keyed ones with no deadline (or none left: a long poll's re-run answers it): no heap
        # entry brings them back, so each look lets those finished elsewhere go.
        self._unbounded: dict[Parked[A], None] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        # Held through each pass of its thread and by `close`: no part follows a stream's last
        # (a compressed stream's last carries the checksum of all the parts before it).
        self._passing = threading.RLock()
        # Held while a round of answers is handed over. A server whose workers pass through
        # it before reading a request keeps a round from being interleaved with the requests
        # its first answers bring back: each such request would hold the interpreter lock
        # while later answers of the round wait.
        self.gate = threading.Lock()
        self._round = self.round_state = threading.local()  # .pending: after_round's work
        # Waiters' own work (filters, re-runs, copy pages): never on this room's thread.
        self.owner_work = OwnerPool()
        self._places: tuple[threading.BoundedSemaphore, FairPlaces] | None = None

    def offload(
        self, owner: Hashable, budget: Budget, attempt: Callable[[int], A | Part[A] | None]
    ) -> Offloaded[A]:
        """`attempt` made an owner's work (`refimpl.waiting.owners`): give the result to a
        `Parked` as its attempt, then `bind` it to that request."""
        return Offloaded(self.owner_work, self.redo, owner, budget, attempt)

    def wait_places(self, places: threading.BoundedSemaphore) -> FairPlaces:
        """The server's wait places (`places`), shared fairly by user
        (`refimpl.waiting.places`); the same object for the same `places`."""
        with self._lock:
            if self._places is None or self._places[0] is not places:
                self._places = (places, FairPlaces(places))
            return self._places[1]

    def watch_writers(self, writers: QueuedWriters) -> None:
        """Pace the fan-out by the commits that queue in `writers` (a database's log whose
        streams the room sends): while none queue, every round goes at once (`FanoutPace`)."""
        self._fanout_pace.watch(writers)

    def redo(self, parked: Parked[A]) -> None:
        """Attempt `parked` again soon, though no commit came (its offloaded work is done)."""
        with self._lock:
            if parked.signal is None:
                if parked not in self._keyed:
                    return
                self._poked.append(parked)
            else:
                parked.seen = -1  # news for the next round, whatever the signal's LSN
        self._wake.set()

    def after_round(self, action: Callable[[], None]) -> None:
        """Run `action` once the current round's answers are all handed over.

        At once when not called from within a round. The server re-arms an answered
        connection this way: a reader's next request would otherwise wake a worker while the
        round is still being sent, and each such wake-up takes the interpreter lock away.
        """
        pending = getattr(self._round, "pending", None)
        if pending is None:
            action()
        else:
            pending.append(action)

    def paced(self, signal: Signal) -> bool:
        """True while readers of `signal`'s database that have news wait for the next round."""
        with self._lock:
            if signal in self._in_round:
                return True  # its readers are being answered: the next round has the rest
            pace = self._paces.get(signal)
            return pacing(pace, signal, time.monotonic())

    def parked_count(self) -> int:
        """How many requests are parked now (readers, acknowledgements, keyed waits)."""
        with self._lock:
            return len(self._readers) + len(self._others) + len(self._keyed)

    def wake(self) -> None:
        """Attempt every parked request again now (something other than a commit changed)."""
        with self._lock:
            self._attempt_all = True
        self._wake.set()

    def park(self, parked: Parked[A]) -> None:
        """Decide `parked` at the next commit that brings news, or at its deadline.

        The room looks at its parked requests again only when this one needs it now: it has
        news already (a commit came after its last attempt), or its deadline is nearer than
        the room's next look. A hundred readers coming back after a round thus cost no
        hundred passes over everything parked.
        """
        with self._lock:
            closed = self._closed
            if not closed and parked.signal is None:
                self._keyed[parked] = None
                if parked.deadline != math.inf:
                    entry = (parked.deadline, next(self._order), parked)
                    heapq.heappush(self._keyed_deadlines, entry)
                else:
                    self._unbounded[parked] = None
                self._start_thread()
                wake = parked.deadline < self._next_look
            elif not closed:
                signal = parked.signal
                assert signal is not None  # the branch above took those without one
                wake = False
                if signal not in self._signals:
                    self._signals.add(signal)
                    signal.listen(self._on_commit)
                    wake = True  # a commit may have come before the listener was in place
                if parked.paced:
                    self._readers.append(parked)
                    self._reader_signals[signal] = self._reader_signals.get(signal, 0) + 1
                else:
                    self._others.append(parked)
                if parked.deadline != math.inf:
                    entry = (parked.deadline, next(self._order), parked)
                    heapq.heappush(self._deadlines, entry)
                self._start_thread()
                wake = (
                    wake or self._has_news_due(parked, signal) or parked.deadline < self._next_look
                )
        if closed:
            self._decide(parked, parked.on_timeout)
        elif wake:
            self._wake.set()

    def park_acknowledgement(self, parked: Parked[A]) -> None:
        """`park` for a write's acknowledgement (unpaced, no deadline): one lock and one
        append when its signal is listened to already (mostly)."""
        signal = parked.signal
        with self._lock:
            if fast := not self._closed and signal in self._signals and self._thread is not None:
                self._others.append(parked)
        if not fast:
            self.park(parked)
        elif signal is not None and signal.lsn > parked.seen:  # durable already: news now
            self._wake.set()

    def poke(self, parked: Parked[A]) -> None:
        """A request woken by its key (no signal): attempt it now. Cheap, never blocking."""
        with self._lock:
            if parked not in self._keyed:
                return
            self._poked.append(parked)
        self._wake.set()

    def poke_all(self, requests: list[Parked[A]]) -> None:
        """`poke` for many paced requests at once (the streams of a database at its commit),
        attempted in the next fan-out round: one lock (none while the list waits for it) and
        one wake-up, so that the thread publishing a commit pays nothing per stream. The
        same list poked again before that round counts once (a database's streams at several
        commits); the caller must not change a list it handed over."""
        if requests in self._fanout_groups:
            return  # poked, its round not begun: the round takes what is durable when it runs
        with self._lock:
            # With a round due already, the room looks by then anyway: a thousand commits
            # a second cost it no wake-up each.
            due = self._fanout_due()
            if not any(group is requests for group in self._fanout_groups):
                self._fanout_groups.append(requests)
        if not due:
            self._wake.set()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kdb-waiting-room", daemon=True)
            self._thread.start()

    def _has_news_due(self, parked: Parked[A], signal: Signal) -> bool:
        """True when `parked` (waiting on `signal`) has news the room will not look at in
        time by itself."""
        if signal.lsn <= parked.seen:
            return False
        pace = self._paces.get(signal) if parked.paced else None
        if pace is None or not pacing(pace, signal, time.monotonic()):
            return True
        # A paced reader waits for the next round, and the room looks by then anyway.
        return self._next_look > pace.next_round

    def _on_commit(self) -> None:
        """A commit became durable: the publishing thread (mostly the flusher, which made
        it so) answers the writes it acknowledges itself; the room's thread is woken only
        for parked readers. A flush thus costs no second thread's wake-up."""
        with self._lock:
            # `park` only appends to the list, the others put a new one in its place: while
            # it is the same and as long, none was parked since (those are the next flush's).
            parked_now = self._others
            others = parked_now[:]
            readers = bool(self._readers)
        # Write acknowledgements: no pace, and each attempt reads its own log's durable LSN.
        decide = self._decide
        decided = [p for p in others if decide(p, p.attempt, 0)]
        if decided:
            with self._lock:
                current = self._others
                if current is parked_now and len(current) == len(decided):
                    self._others = []  # a flush answers every one parked before it: mostly
                else:
                    gone = set(decided)
                    self._others = [d for d in current if d not in gone]
        if readers:
            self._wake.set()

    def close(self) -> None:
        """Answer each parked request with what it has, after the pass under way; later at once."""
        with self._passing, self._lock:
            self._closed = True
            everything = self._others + self._readers + list(self._keyed)
            self._others, self._readers, self._reader_signals = [], [], {}
            self._deadlines, self._keyed, self._keyed_deadlines, self._poked = [], {}, [], []
            self._unbounded = {}
        self.owner_work.close()
        self._wake.set()  # its thread ends now, not at its next look (then the room is garbage)
        for parked in everything:
            if not self._decide(parked, parked.at_close):
                parked.drop()  # a stream whose closing word was only a part

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                # Entries of requests decided elsewhere (long polls: by their pool) or whose
                # deadline moved on (a heartbeat) would make the room look again for nothing.
                while self._deadlines and (
                    self._deadlines[0][2].finished
                    or self._deadlines[0][2].deadline != self._deadlines[0][0]
                ):
                    heapq.heappop(self._deadlines)
                while (keyed := self._keyed_deadlines) and keyed[0][2].finished:
                    self._keyed.pop(heapq.heappop(keyed)[2], None)
                for parked in [p for p in self._unbounded if p.finished]:
                    del self._unbounded[parked]
                    self._keyed.pop(parked, None)
                nearest = self._deadlines[0][0] if self._deadlines else None
                if keyed and (nearest is None or keyed[0][0] < nearest):
                    nearest = keyed[0][0]
                if self._fanout_due() and (
                    nearest is None or self._fanout_pace.next_round < nearest
                ):
                    nearest = self._fanout_pace.next_round
                if self._readers and self._paces:
                    now = time.monotonic()
                    ahead = [p.next_round for p in self._paces.values() if p.next_round > now]
                    if ahead and (nearest is None or min(ahead) < nearest):
                        nearest = min(ahead)
                now = time.monotonic()
                timeout = EMPTY_LOOK_SECONDS if nearest is None else max(0.0, nearest - now)
                self._next_look = now + timeout
            self._wake.wait(timeout)
            self._wake.clear()
            with self._passing:  # re-entrant: a close from within a pass goes on
                if not self._closed:
                    self._decide_due()
                    self._decide_keyed()

    def _decide_keyed(self) -> None:
        """Attempt the poked requests woken by their key (the paced ones in fan-out rounds);
        answer those past their deadline."""
        with self._lock:
            poked: list[Parked[A]] = []
            keyed = self._keyed
            for parked in self._poked:
                if parked not in keyed:
                    continue  # answered or dropped meanwhile
                if parked.paced:
                    self._fanout[parked] = None
                else:
                    poked.append(parked)
            self._poked = []
            now = time.monotonic()
            fanout: list[Parked[A]] | None = None
            if self._fanout_due() and self._fanout_pace.due(now):
                fanout = self._fanout_members()
            due: list[Parked[A]] = []
            while self._keyed_deadlines and self._keyed_deadlines[0][0] <= now:
                _, _, parked = heapq.heappop(self._keyed_deadlines)
                if parked in self._keyed and parked.deadline <= now:
                    due.append(parked)
                elif parked in self._keyed and parked.deadline == math.inf:  # taken off since
                    self._unbounded[parked] = None
        finished: list[Parked[A]] = []
        rescheduled: list[Parked[A]] = []
        for parked in poked:
            if not parked.finished and self._decide(parked, parked.attempt, 0):
                finished.append(parked)
        if fanout is not None:
            self._fanout_round(fanout, finished)
        for parked in due:
            if parked.finished:
                finished.append(parked)
            elif self._decide(parked, parked.on_timeout):
                finished.append(parked)
            else:
                rescheduled.append(parked)  # a stream's heartbeat: its deadline moved on
        with self._lock:
            for parked in finished:
                self._keyed.pop(parked, None)
            for parked in rescheduled:
                if parked.deadline != math.inf:
                    entry = (parked.deadline, next(self._order), parked)
                    heapq.heappush(self._keyed_deadlines, entry)
                else:  # its answer is made elsewhere now (a long poll's re-run)
                    self._unbounded[parked] = None

    def _fanout_due(self) -> bool:
        """Whether anything waits for a fan-out round (the caller holds the lock)."""
        return bool(self._fanout or self._fanout_groups or self._fanout_batches)

    def _fanout_members(self) -> list[Parked[A]]:
        """Who the fan-out round that starts now attempts, each once; no longer waiting
        (the caller holds the lock)."""
        groups, self._fanout_groups = self._fanout_groups, []
        single, self._fanout = self._fanout, {}
        if not single and len(groups) == 1:
            return groups[0]  # one database's streams: the list itself, no copy
        for group in groups:
            single.update(dict.fromkeys(group))
        return list(single)

    def _fanout_round(self, requests: list[Parked[A]], finished: list[Parked[A]]) -> None:
        """Attempt the poked paced requests once each, as a round: the batches of those sent
        by one (`Parked.batch`) once each, first, then the others each in turn; while writers
        queue, the next round is spaced by the CPU time this one cost (`FanoutPace`).

        No gate, unlike the readers' rounds: a stream's part brings no request back, so the
        writers' requests go on while the round's sends are in the kernel, and the
        interpreter is shared between them and the round (`taking_turns`)."""
        pending: list[Callable[[], None]] = []
        self._round.pending = pending
        cpu = time.thread_time()
        with self._lock:
            batches, self._fanout_batches = self._fanout_batches, {}
        alone = split_batches(requests, batches)
        again: dict[Batch, None] = {}
        decide = self._decide
        try:
            for batch in batches:
                if self._fan_out(batch):
                    again[batch] = None
            if alone:
                first = int(self._fanout_rounds * FANOUT_STRIDE * len(alone)) % len(alone)
                for parked in taking_turns(itertools.chain(alone[first:], alone[:first])):
                    if parked.finished or decide(parked, parked.attempt, 0):
                        finished.append(parked)
        finally:
            self._fanout_rounds += 1
            self._round.pending = None
            _run_all(pending)
            cost = time.thread_time() - cpu
        with self._lock:
            self._fanout_batches.update(again)
            self._fanout_pace.round(cost, behind=bool(again))

    @staticmethod
    def _fan_out(batch: Batch) -> bool:
        try:
            return batch.fan_out()
        except Exception:  # a bug: the other batches and streams of the round go on
            log.warning("sending a batch of streams their part failed", exc_info=True)
            return False

    def _decide_due(self) -> None:
        with self._lock:
            attempt_all, self._attempt_all = self._attempt_all, False
            now = time.monotonic()
            paces = dict(self._paces)
            others = list(self._others)
            deadline_due = bool(self._deadlines) and self._deadlines[0][0] <= now
            readers_due = (
                attempt_all
                or deadline_due
                or any(
                    not pacing(paces.get(signal), signal, now) for signal in self._reader_signals
                )
            )
            readers = list(self._readers) if readers_due else []
            # Readers answered early in the round come back while it goes on: they wait for
            # the next round with the others, not each an answer from a position of its own.
            self._in_round = set(self._reader_signals) if readers else set()
        decided: set[Parked[A]] = set()
        answered: dict[Signal, int] = {}  # readers given news in this round
        cost = 0.0
        pending: list[Callable[[], None]] = []
        self._round.pending = pending
        try:
            # Writers first: none waits behind a round of readers its own commit woke.
            self._answer_round(others, paces, now, decided, answered, attempt_all)
            if readers:
                started = time.monotonic()
                with self.gate:
                    self._answer_round(readers, paces, now, decided, answered, attempt_all)
                cost = time.monotonic() - started
        finally:
            self._round.pending = None
            _run_all(pending)
        with self._lock:
            self._in_round = set()
            if not decided:
                return
            for signal in answered:
                self._paces.setdefault(signal, Pace()).round(now, cost)
            self._others = [d for d in self._others if d not in decided]
            if readers:
                kept = []
                for parked in self._readers:
                    if parked in decided:
                        on = parked.signal
                        assert on is not None  # readers wait on a commit signal
                        count = self._reader_signals[on]
                        if count > 1:
                            self._reader_signals[on] = count - 1
                        else:
                            del self._reader_signals[on]
                    else:
                        kept.append(parked)
                self._readers = kept
                self._deadlines = [e for e in self._deadlines if e[2] not in decided]
                heapq.heapify(self._deadlines)

    def _decide(
        self, parked: Parked[A], produce: Callable[..., A | Part[A] | None], *args: int
    ) -> bool:
        """Hand `parked` what `produce(*args)` gives (an error becomes its answer); True when
        it is finished (answered or dropped), False when it waits on (nothing yet, or a part).
        """
        try:
            outcome = produce(*args)
        except Exception as exc:  # noqa: BLE001 - a 410 or a bug: the client gets its answer
            outcome = self._on_error(exc)
        if outcome is None:
            return False
        try:
            return parked.decide(outcome)
        except Exception:  # a broken connection is the server's to close; keep deciding others
            log.warning("handing over a waiting request's answer failed", exc_info=True)
            return True

    def _answer_round(
        self,
        requests: list[Parked[A]],
        paces: dict[Signal, Pace],
        now: float,
        decided: set[Parked[A]],
        answered: dict[Signal, int],
        attempt_all: bool,
    ) -> None:
        # Each signal's LSN is read once per round: commits published while the round goes
        # out do not split its readers into groups with answers of their own to encode.
        round_lsns: dict[Signal, int] = {}
        for parked in requests:
            signal = parked.signal
            assert signal is not None  # readers and others wait on a commit signal
            pace = paces.get(signal) if parked.paced else None
            lsn = round_lsns.get(signal)
            if lsn is None:
                lsn = round_lsns[signal] = signal.lsn
            news = lsn > parked.seen or attempt_all
            if news and not pacing(pace, signal, now):
                parked.seen = lsn
                if self._decide(parked, parked.attempt, lsn):
                    decided.add(parked)
                    if parked.paced:
                        answered[signal] = answered.get(signal, 0) + 1
                    continue
            if now >= parked.deadline:
                if self._decide(parked, parked.on_timeout):
                    decided.add(parked)
                elif parked.deadline != math.inf:  # a stream's heartbeat: due again later
                    with self._lock:
                        entry = (parked.deadline, next(self._order), parked)
                        heapq.heappush(self._deadlines, entry)


def _run_all(actions: list[Callable[[], None]]) -> None:
    for action in actions:
        try:
            action()
        except Exception:  # one connection's trouble must not keep the others waiting
            log.warning("finishing an answered request failed", exc_info=True)
