"""A user's batch of woken live queries (long polls and streams): one job on the user's
share of the waiting room's pool makes all their answers or parts, then hands them over."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, Protocol

from refimpl.engine.features.live_pass import PassReads
from refimpl.waiting.room import WaitingRoom

log = logging.getLogger("refimpl.subscribe")

# What a woken live query's `make` gives: the hand-over of what it made (what the call
# returns is not used).
HandOver = Callable[[], object]


class Headed(NamedTuple):
    """What a woken stream's `make` gives for a part that others may end alike: `head`
    (its own `id:` line) then `body` (a `rows_event`, one bytes object for all the streams
    that share it), to the client of `outlet` (its `Parked.outlet`). The streams of a pass
    whose parts share a body are sent it at once (`WaitingRoom.send_headed`); those after
    it that take its step are made at once by `takes_after`, if given."""

    outlet: object
    head: bytes
    body: bytes
    takes_after: TakesAfter | None = None


class TakesAfter(Protocol):
    """The parts of `woken[at]` and those in a row after it that take the step a stream's
    part took (`_LiveStream.take_after`); they end before the first that does not, which is
    made as usual."""

    def __call__(self, woken: list[Runs], at: int) -> Taken: ...


class Taken(NamedTuple):
    """The parts a `TakesAfter` call made: its streams (`runs`, in `woken`'s order, none
    when the first did not take the step), their one `body`, and each one's (outlet, head)
    in `sends`, in the same order. Kept whole in the pass's `made`, one entry for all:
    not a `Headed` and an entry a stream that only a failed flush would read."""

    runs: Sequence[Runs]
    body: bytes
    sends: _Sends


class Runs(Protocol):
    """What a user's batch of woken live queries runs (`Woken`)."""

    def make(self) -> HandOver | Headed | None:
        """Make the answer or part (the query's work), not yet handed over; the call that
        hands it over, or None when there is nothing to hand over now."""
        ...


# A woken live query made in a pass (`Woken._make_all`): it, what its `make` gave, and the
# database whose commits that shows before they may be durable (`PassReads.shown`), if any;
# or the parts a `TakesAfter` made, their first stream, `Taken`, and that database.
Made = tuple[Runs, "HandOver | Headed | Taken", object]
_Sends = list[tuple[object, bytes]]  # (outlet, head) of parts that share one body
# Headed parts by their body: each body's streams are sent it at once.
_Shared = dict[bytes, _Sends]


class Woken:
    """The live queries of one user (long polls and streams) that commits woke, waiting for
    their answers or parts to be made: one job on the user's share of the room's pool makes
    them all, one after another, then hands them over, one after another (a commit waking a
    hundred of them hands one job over, not a hundred, and never goes through the room's
    thread). Every answer is made before the first is sent: a send wakes its client, whose
    process may take the processor, and other threads may take the interpreter lock, so
    sends among the making made the job lose both at nearly every answer (with 10 woken
    long polls, its thread ran 9.5 times a commit), each time coming back to cold caches.
    Those woken while it runs are made by its next job, queued behind the user's other work
    on the pool: were it to make them too, commits that keep coming would keep it running,
    and that work (a `where=` filter, a copy's page) and the answered connections' next
    requests (`WaitingRoom.after_round`) would wait for the commits to stop."""

    def __init__(self, room: WaitingRoom, owner: Hashable) -> None:
        self._room = room
        self._owner = owner
        self._lock = threading.Lock()
        self._woken: list[Runs] = []
        self._running = False
        # The reads of the pass under way, a new one each pass: its streams read the
        # revision counters and the access records once for all (`PassReads`).
        self.reads = PassReads()

    def add(self, woken: Runs) -> None:
        """`woken.make()` is called soon, on the user's share, and what it gives after the
        others of its pass are made (cheap, never blocks)."""
        with self._lock:
            self._woken.append(woken)
            if self._running:
                return
            self._running = True
        self._room.owner_work.submit(self._owner, self._run)

    def _run(self) -> None:
        # One round of answers: the connections they answered are watched for their next
        # requests once all are handed over (`WaitingRoom.after_round`), so that a client's
        # next request does not take the interpreter away from the answers still to make.
        # Those whose client asked again meanwhile are answered by this thread then
        # (`answers_next`, read by the server as it sends an answer): the re-poll parks
        # at once, at a fraction of a worker's wake-up and the connection's arming.
        state = self._room.round_state
        if getattr(state, "pending", None) is not None:
            self._run_all()  # within a round already: its end runs them
            return
        pending: list[Callable[[], None]] = []
        state.pending, state.answers_next = pending, True
        try:
            self._run_all()
        finally:
            state.answers_next = None
            # What the actions leave for later (a second look at a connection whose next
            # request had not come yet) runs once they have all run, and so on.
            try:
                while pending:
                    actions = pending
                    state.pending = pending = []
                    for action in actions:
                        try:
                            action()
                        except Exception:  # one connection's trouble must not keep others'
                            log.warning("finishing an answered request failed", exc_info=True)
            finally:  # whatever ends them: the thread's next round is a round of its own
                state.pending = None

    def _make_all(
        self, woken: list[Runs], made: list[Made], hand_overs: list[HandOver], shared: _Shared
    ) -> None:
        """Make each of `woken`: (it, its hand-over or headed part, the database whose
        commits it shows before they may be durable) in `made`, and its hand-over in
        `hand_overs` or its headed part in `shared` (by its body)."""
        reads = self.reads
        keep = made.append
        at, count = 0, len(woken)
        while at < count:
            each = woken[at]
            at += 1
            reads.shown = None
            try:
                hand_over = each.make()
            except Exception:
                # One query's failure costs it only: the others of this pass are made
                # all the same.
                log.warning("making a live query's answer failed", exc_info=True)
                continue
            if hand_over is None:
                continue
            keep((each, hand_over, reads.shown))
            # `_gather`'s, in line: gathered as made, not in a second loop over the parts.
            if type(hand_over) is not Headed:
                hand_overs.append(hand_over)  # type: ignore[arg-type]  # not Headed
                continue
            sharing = shared.get(hand_over.body)
            if sharing is None:
                sharing = shared[hand_over.body] = []
            sharing.append((hand_over.outlet, hand_over.head))
            takes_after = hand_over.takes_after
            if takes_after is None or at == count:
                continue
            # Those after it that take its step (a hundred streams of one query woken by one
            # commit): made in one call, with one body; the first that does not, as usual.
            reads.shown = None
            try:
                taken = takes_after(woken, at)
            except Exception:
                log.warning("making live queries' parts failed", exc_info=True)
                continue
            runs = taken.runs
            if runs:
                at += len(runs)
                keep((runs[0], taken, reads.shown))  # (one database's, for all)
                sharing = shared.setdefault(taken.body, [])
                sharing += taken.sends

    @staticmethod
    def _gather(made: list[Made], hand_overs: list[HandOver], shared: _Shared) -> None:
        """Each hand-over of `made` in `hand_overs`, each headed part in `shared` (by its
        body), as `_make_all` gathers them."""
        for _, hand_over, _ in made:
            if isinstance(hand_over, Headed):
                shared.setdefault(hand_over.body, []).append((hand_over.outlet, hand_over.head))
            elif isinstance(hand_over, Taken):
                shared.setdefault(hand_over.body, []).extend(hand_over.sends)
            else:
                hand_overs.append(hand_over)

    def _settled(self, made: list[Made], hand_overs: list[HandOver], shared: _Shared) -> None:
        """Once the commits the parts of `made` show are durable (made while their flush ran:
        none is sent before it has ended). When a database's log failed instead, its parts
        are made again, and answer the failure (`PassReads.settle`), and `hand_overs` and
        `shared` are gathered again: the others' parts, as made (made again, a well query
        would find its counter read and answer nothing: its change lost to that client),
        then the failed ones'. Only then is anything of the pass gathered a second time."""
        failed = self.reads.settle()
        if not failed:
            return
        hand_overs.clear()
        shared.clear()
        self._gather([one for one in made if one[2] not in failed], hand_overs, shared)
        remade: list[Runs] = []
        for each, hand_over, shown in made:
            if shown in failed:
                if isinstance(hand_over, Taken):
                    remade += hand_over.runs
                else:
                    remade.append(each)
        self._make_all(remade, [], hand_overs, shared)

    def _run_all(self) -> None:
        """One pass: those woken so far, all made, then all handed over; a job for the next
        pass when more came meanwhile."""
        with self._lock:
            woken, self._woken = self._woken, []
        hand_overs: list[HandOver] = []
        made: list[Made] = []
        shared: _Shared = {}
        try:
            try:
                # What the pass counted is counted before its parts are sent.
                with PassReads() as self.reads:
                    self._make_all(woken, made, hand_overs, shared)
            finally:
                self._settled(made, hand_overs, shared)
                for body, parts in shared.items():
                    try:
                        self._room.send_headed(parts, body)
                    except Exception:  # a bug: the other bodies and hand-overs go on
                        log.warning("sending live queries' parts failed", exc_info=True)
                # Even past an error that ends the pass: a long poll whose answer was made
                # counts as running until it is handed over, and its deadline waits for it.
                for hand_over in hand_overs:
                    try:
                        hand_over()
                    except Exception:  # a stream's part handed over after its end: its own
                        log.warning("handing over a live query's answer failed", exc_info=True)
                # The pass's bookkeeping that no part waits for, after every send.
                self.reads.touch_asked()
        finally:
            with self._lock:
                again = self._running = bool(self._woken)
            if again:
                self._room.owner_work.submit(self._owner, self._run)


def woken(room: WaitingRoom, owner: Hashable) -> Woken:
    """The batch of `owner`'s woken live queries in `room` (one a user, kept by the room's
    pool: `OwnerPool.batches`)."""
    batches = room.owner_work.batches
    batch = batches.get(owner)
    if batch is None:  # of two made at once, both callers take the one kept
        batch = batches.setdefault(owner, Woken(room, owner))
    return batch
