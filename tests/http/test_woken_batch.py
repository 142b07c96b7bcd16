"""A user's batch of woken live queries (woken_batch's `Woken`, on a real waiting room's
pool): every answer of a pass is made before the first is handed over; one query whose
answer fails to be made or handed over costs that query only; the others woken with it are
still made and handed over."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from refimpl.http.endpoints.woken_batch import woken
from refimpl.http.error_answers import to_response
from refimpl.waiting.room import WaitingRoom


class _Blocking:
    """Runs until told to end: the ones woken meanwhile wait for the batch's next pass."""

    def __init__(self) -> None:
        self.started, self.go = threading.Event(), threading.Event()

    def make(self) -> None:
        self.started.set()
        assert self.go.wait(5)


class _Failing:
    def make(self) -> None:
        raise RuntimeError("a bug in making the answer")


class _FailingHandOver:
    def make(self) -> Callable[[], None]:
        def hand_over() -> None:
            # As a stream's part handed over after its end at its most age (InvalidMove).
            raise RuntimeError("a part after the end")

        return hand_over


class _Counted:
    def __init__(self) -> None:
        self.ran = threading.Event()

    def make(self) -> Callable[[], None]:
        return self.ran.set


def test_a_failing_one_leaves_the_others_of_its_pass_made(room: WaitingRoom) -> None:
    batch = woken(room, "u")
    first, failing, other = _Blocking(), _Failing(), _Counted()
    batch.add(first)
    assert first.started.wait(5)
    batch.add(failing)  # all in the batch's next pass
    batch.add(_FailingHandOver())
    batch.add(other)
    first.go.set()
    assert other.ran.wait(5), "a query woken with a failing one was never made"
    later = _Counted()
    batch.add(later)
    assert later.ran.wait(5)


class _Rewoken:
    """A stream a commit wakes again each time its part is made (commits keep coming)."""

    def __init__(self, room: WaitingRoom, until: float) -> None:
        self.room, self.until = room, until

    def make(self) -> None:
        time.sleep(0.001)  # its re-run
        if time.monotonic() < self.until:
            woken(self.room, "u").add(self)


class _Answered:
    """A long poll the batch answers: the server re-arms its connection after the round."""

    def __init__(self, room: WaitingRoom) -> None:
        self.room, self.rearmed = room, threading.Event()

    def make(self) -> Callable[[], None]:
        return lambda: self.room.after_round(self.rearmed.set)


def test_commits_that_keep_coming_hold_up_neither_the_users_work_nor_its_answers(
    room: WaitingRoom,
) -> None:
    """Before, the batch's job made those woken while it ran too, and commits that kept
    coming kept it running: the user's other work on the pool, and the re-arming of the
    connections it answered, waited for the commits to stop."""
    churn = _Rewoken(room, time.monotonic() + 4.0)
    woken(room, "u").add(churn)
    time.sleep(0.05)
    other = threading.Event()
    room.owner_work.submit("u", other.set)  # the user's filtered long poll, say
    poll = _Answered(room)
    woken(room, "u").add(poll)
    assert other.wait(1.0), "the user's other work waited for the commits to stop"
    assert poll.rearmed.wait(1.0), "an answered connection waited for the commits to stop"
    churn.until = 0.0


def _hold(event: threading.Event) -> None:
    """The user's share of the pool held until `event`: what is added meanwhile is one pass."""
    assert event.wait(10)


class _Logged:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def make(self) -> Callable[[], None]:
        self.log.append(f"made {self.name}")
        return lambda: self.log.append(f"handed over {self.name}")


def test_a_pass_makes_every_answer_before_it_hands_any_over(room: WaitingRoom) -> None:
    """A send wakes its client and lets other threads take the interpreter: sends among
    the making made the batch's thread lose the processor at nearly every answer."""
    log: list[str] = []
    busy, done = threading.Event(), threading.Event()
    room.owner_work.submit("u", lambda: _hold(busy))  # all three come in one pass
    batch = woken(room, "u")
    for name in "abc":
        batch.add(_Logged(name, log))
    batch.add(_Counted())
    batch.add(_Logged("last", log))
    room.owner_work.submit("u", done.set)
    busy.set()
    assert done.wait(10)
    made = [f"made {name}" for name in ("a", "b", "c", "last")]
    assert log == made + [f"handed over {name}" for name in ("a", "b", "c", "last")]


class _Ending(BaseException):
    """Not an Exception: it ends the pass (as an interpreter's exit would)."""


class _EndsThePass:
    def make(self) -> None:
        raise _Ending


def test_answers_made_are_handed_over_even_when_the_pass_ends_early(room: WaitingRoom) -> None:
    """A long poll whose answer is made waits for its hand-over past its deadline: it must
    come, whatever ends the pass."""
    log: list[str] = []
    batch = woken(room, "ending")
    busy = threading.Event()
    room.owner_work.submit("ending", lambda: _hold(busy))  # the pool's job waits
    try:
        batch.add(_Logged("a", log))
        batch.add(_EndsThePass())
        batch.add(_Logged("never", log))
        with pytest.raises(_Ending):
            batch._run_all()  # the pass, on this thread
    finally:
        busy.set()
    assert log == ["made a", "handed over a"]


def test_one_batch_a_user_in_each_room(room: WaitingRoom) -> None:
    """The batches are the room's (kept by its pool), no module's: one a user, another
    room's apart."""
    assert woken(room, "u") is woken(room, "u")
    assert woken(room, "u") is not woken(room, "v")
    other = WaitingRoom(to_response)
    try:
        assert woken(other, "u") is not woken(room, "u")
    finally:
        other.close()
