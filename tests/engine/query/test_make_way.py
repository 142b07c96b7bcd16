"""`deadlines.make_way`: long work that holds no lock pauses (the interpreter lock let go) after
each TURN_SECONDS of its steps, and not more often."""

from __future__ import annotations

import threading
import time

import pytest

from refimpl.engine import admission
from refimpl.engine.query import deadlines
from refimpl.engine.storage.locks import SharedLock, reading_under_lock
from refimpl.netpool.places import FifoSlots

# One step of the work the two tests below run: TURN_SECONDS is twenty of them.
STEP_SECONDS = 0.0001


class _StepClock:
    """`deadlines`' clock for the thread that runs a test's steps: it moves only by those
    steps and by the pauses `make_way` sleeps (noted, not slept), whatever the machine does
    meanwhile. On the real clock a loaded machine broke the rule's test: a thread stopped
    for FRESH_AFTER_SECONDS starts new work again (no pause in its 60 ms), and another
    thread's sleep counted as a pause. Other threads keep the real clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.steps = 0
        self.paused_at: list[int] = []  # the step count at each pause
        self.pauses: list[float] = []
        self.thread: int | None = None

    def monotonic(self) -> float:
        return self.now if threading.get_ident() == self.thread else time.monotonic()

    def sleep(self, seconds: float) -> None:
        if threading.get_ident() != self.thread:
            time.sleep(seconds)
            return
        self.paused_at.append(self.steps)
        self.pauses.append(seconds)
        self.now += seconds

    def run(self, steps: int) -> None:
        """`steps` steps of STEP_SECONDS, `make_way` after each, in a thread of its own (its
        first call starts its turn, whatever other tests did)."""

        def work() -> None:
            self.thread = threading.get_ident()
            for _ in range(steps):
                self.now += STEP_SECONDS
                self.steps += 1
                deadlines.make_way()

        worker = threading.Thread(target=work)
        worker.start()
        worker.join(30)


def test_long_work_pauses_once_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _StepClock()
    monkeypatch.setattr(deadlines, "time", clock)
    clock.run(600)  # 60 ms of steps, each far shorter than a turn
    assert clock.pauses, "60 ms of work never let the lock go"
    assert set(clock.pauses) == {deadlines.TURN_PAUSE_SECONDS}
    # A pause after each turn's steps (the first turn's and every one after a pause), not
    # more often: twenty steps, or up to two more (the turn starts at the first call, and
    # the clock's sums round).
    turn = round(deadlines.TURN_SECONDS / STEP_SECONDS)
    gaps = [b - a for a, b in zip([0, *clock.paused_at], clock.paused_at, strict=False)]
    assert all(turn <= gap <= turn + 2 for gap in gaps), gaps
    assert clock.steps - clock.paused_at[-1] <= turn + 2


def test_short_work_does_not_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _StepClock()
    monkeypatch.setattr(deadlines, "time", clock)
    clock.run(3)
    assert clock.pauses == []


class _NoDeadline:
    def statement_deadline(self) -> float | None:
        return None


def _steps(seconds: float, bulk: bool) -> None:
    """`seconds` of short steps with make_way between them, as a client's own work (`bulk`)
    or not."""
    with deadlines.running(_NoDeadline(), bulk=bulk):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            deadlines.make_way()


def test_turns_go_in_the_order_asked() -> None:
    """While one thread holds the turn, the others get it one at a time, first asked first;
    the holder asking again goes after them."""
    turns = deadlines.Turns(lapses=60.0)  # no turn lapses while the test runs
    turns.next_turn()  # this thread holds the turn
    order: list[str] = []
    done = threading.Event()

    def ask(name: str) -> None:
        turns.next_turn()
        order.append(name)
        turns.give_up()  # its work ended
        done.wait(30)

    waiters = []
    for name in ("first", "second"):
        waiter = threading.Thread(target=ask, args=(name,))
        waiter.start()
        waiters.append(waiter)
        for _ in range(3000):  # until it queues, so that the order asked is known
            if turns.waiting() == len(waiters):
                break
            time.sleep(0.001)
    assert turns.waiting() == 2
    turns.next_turn()  # given up, and taken again after both
    order.append("holder")
    done.set()
    for waiter in waiters:
        waiter.join(30)
    assert order == ["first", "second", "holder"]
    assert turns.waiting() == 0


def test_work_that_is_no_clients_never_waits_for_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The waiting room's and the workers' own encodings pause, but never queue for the turn
    (they answer everyone; the turn is for clients' own work)."""
    turns: list[int] = []
    monkeypatch.setattr(deadlines.Turns, "next_turn", lambda self, owner=None: turns.append(1))
    worker = threading.Thread(target=_steps, args=(0.030, False))
    worker.start()
    worker.join(30)
    assert turns == []

    def clients_work() -> None:
        # Until it asks for a turn (a busy machine may stop this thread for long).
        until = time.monotonic() + 20
        while not turns and time.monotonic() < until:
            _steps(0.030, True)

    worker = threading.Thread(target=clients_work)
    worker.start()
    worker.join(30)
    assert turns, "a client's long work never asked for a turn"


def test_a_turn_whose_holder_is_gone_passes_on() -> None:
    """A holder that ends its work between turns (it never asks again) holds up the next
    one until its turn lapses, and no longer."""
    turns = deadlines.Turns()
    turns.next_turn()  # this thread takes the turn and never asks again
    took: list[float] = []
    started = time.monotonic()

    def wait_for_turn() -> None:
        turns.next_turn()
        took.append(time.monotonic())

    waiter = threading.Thread(target=wait_for_turn)
    waiter.start()
    waiter.join(30)  # generous: the turn lapses after TURN_LAPSES_SECONDS
    assert took, "the next thread never got the turn of a holder that was gone"
    assert took[0] - started >= deadlines.TURN_LAPSES_SECONDS * 0.9
    assert turns.waiting() == 0


def test_a_clients_work_gives_up_its_turn_when_it_ends() -> None:
    holders: list[int | None] = []

    def work() -> None:
        _steps(0.020, True)  # past its first turn: it took the turn
        holders.append(deadlines.BULK._holder)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(30)
    assert holders == [None]


def test_a_clients_work_under_a_state_lock_never_waits_for_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter evaluated while the thread reads under a database's state lock (a live
    query's re-run) pauses but never queues for the turn: a commit would wait for it."""
    turns: list[int] = []
    monkeypatch.setattr(deadlines.Turns, "next_turn", lambda self, owner=None: turns.append(1))
    lock = SharedLock()

    def work() -> None:
        with lock:
            _steps(0.030, True)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(30)
    assert turns == []
    assert not reading_under_lock()


def test_two_clients_long_work_leaves_an_admission_place_to_a_cheap_request() -> None:
    """Two requests admitted to a server's two places (one of them the long lane's) whose
    own long work takes turns: a cheap request gets a place while they run, since such work
    goes to the long lane or gives its place on before it waits for a turn (before, both
    kept their places, and every other request waited for one of them to end)."""
    places = FifoSlots(2, long_places=1)
    admitted = threading.Barrier(3)
    stop = threading.Event()

    def long_request() -> None:
        places.acquire()
        admission.admitted(places.release, places)
        try:
            admitted.wait(30)
            until = time.monotonic() + 30
            while not stop.is_set() and time.monotonic() < until:
                _steps(0.020, True)
        finally:
            admission.done()

    workers = [threading.Thread(target=long_request) for _ in range(2)]
    for worker in workers:
        worker.start()
    admitted.wait(30)  # both hold a place, and their work runs
    served = threading.Event()

    def cheap_request() -> None:
        places.acquire()
        served.set()
        places.release()

    cheap = threading.Thread(target=cheap_request, daemon=True)
    cheap.start()
    try:
        assert served.wait(10), "a cheap request waited for a place while long work ran"
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
        places.open_all()  # a cheap request still waiting gets its place and ends
        cheap.join(30)
