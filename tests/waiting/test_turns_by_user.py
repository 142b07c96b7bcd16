"""The one turn of clients' long work is shared by user (the waiting package's rule of users'
shares): users waiting get it in turn, one turn each, however many threads one of them has;
a protocol's steps of long work (`Steps`) run at once within their first turn and wait for
their user's turn past it, while another user's long work holds it."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable

import pytest

from refimpl.engine.query import deadlines
from tests.waits import eventually


def test_users_waiting_take_the_turn_in_turn_one_each() -> None:
    """User a has two threads waiting, user b one: b's thread goes between a's two, and the
    holder asking again goes after b (thread by thread in the order asked, a's second thread
    came before b's and the holder's turn)."""
    turns = deadlines.Turns(lapses=60.0)  # no turn lapses while the test runs
    turns.next_turn("holder")
    order: list[str] = []

    def ask(owner: Hashable, name: str) -> None:
        turns.next_turn(owner)
        order.append(name)
        turns.give_up()  # its work ended

    waiters = []
    for owner, name in (("a", "a1"), ("a", "a2"), ("b", "b1")):
        waiter = threading.Thread(target=ask, args=(owner, name))
        waiter.start()
        waiters.append(waiter)
        # Until it queues, so that the order asked is known.
        assert eventually(lambda: turns.waiting() == len(waiters), 30.0, 0.001), turns.waiting()
    # The holder asks again: it goes after the users that waited before it, one turn each.
    turns.next_turn("holder")
    order.append("holder")
    turns.give_up()  # a's second thread's turn
    for waiter in waiters:
        waiter.join(30)
    # Thread by thread in the order asked, it was a1, a2, b1, holder.
    assert order == ["a1", "b1", "holder", "a2"]
    assert turns.waiting() == 0


def test_a_user_asking_again_goes_after_the_other_users_waiting() -> None:
    """Two users keep asking for the turn: they alternate, each one turn at a time."""
    turns = deadlines.Turns(lapses=60.0)
    order: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def work(owner: str) -> None:
        other = "b" if owner == "a" else "a"
        barrier.wait(30)
        for _ in range(20):
            turns.next_turn(owner)
            with lock:
                order.append(owner)
            # Its step lasts until the other user asks (or has ended its work).
            eventually(lambda: turns.waiting() > 0 or order.count(other) == 20, 30.0, 0.001)
        turns.give_up()

    threads = [threading.Thread(target=work, args=(o,)) for o in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(order) == ["a"] * 20 + ["b"] * 20
    # Once both ask, no user has two turns in a row while the other waits (the first turn
    # may come before the other's first ask).
    assert all(order[n] != order[n - 1] for n in range(2, len(order))), order


@pytest.fixture
def bulk(monkeypatch: pytest.MonkeyPatch) -> deadlines.Turns:
    """The server's turn of long work, as one whose turns never lapse while a test runs."""
    turns = deadlines.Turns(lapses=60.0)
    monkeypatch.setattr(deadlines, "BULK", turns)
    return turns


def test_steps_within_their_first_turn_never_wait(bulk: deadlines.Turns) -> None:
    """A single query (a step or two of its session's work) runs at once while another
    user's long work holds the turn."""
    bulk.next_turn("hostile")  # held by this thread for the test's whole length
    done = threading.Event()

    def one_query() -> None:
        steps = deadlines.Steps("victim")
        steps.next()
        steps.next()
        steps.end()
        done.set()

    thread = threading.Thread(target=one_query)
    thread.start()
    assert done.wait(30), "a step within the first turn waited for another user's turn"
    thread.join(30)
    bulk.give_up()


def test_steps_past_their_first_turn_wait_for_their_users_turn(bulk: deadlines.Turns) -> None:
    """Past its first turn, a pipeline's next step waits while another user's long work holds
    the turn, and runs once that user gives it up; `end` gives its own turn up."""
    bulk.next_turn("hostile")
    stepped = threading.Event()
    holding: list[int | None] = []

    def pipeline() -> None:
        steps = deadlines.Steps("pipelining")
        steps.next()  # its first turn starts
        time.sleep(deadlines.TURN_SECONDS * 2)  # a step longer than the first turn
        steps.next()  # waits for the turn
        stepped.set()
        holding.append(bulk._holder)
        steps.end()
        holding.append(bulk._holder)

    thread = threading.Thread(target=pipeline)
    thread.start()
    assert eventually(lambda: bulk.waiting() == 1, 30.0, 0.001), (
        "the step past the first turn did not queue"
    )
    assert not stepped.is_set()
    bulk.give_up()
    assert stepped.wait(30), "the step never ran after the turn was given up"
    thread.join(30)
    assert holding[0] == thread.ident
    assert holding[1] is None
