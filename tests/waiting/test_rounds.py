"""`Rounds`: every item handed over runs once, in order, on the one thread; a failing round
does not end it; close runs what came before it."""

from __future__ import annotations

import threading
import time
import weakref

import pytest

from refimpl.waiting.rounds import Rounds


def test_items_from_many_threads_run_once_each_in_each_threads_order() -> None:
    seen: list[tuple[int, int]] = []
    threads_seen: set[str] = set()

    def run_round(items: list[tuple[int, int]]) -> None:
        threads_seen.add(threading.current_thread().name)
        seen.extend(items)

    rounds: Rounds[tuple[int, int]] = Rounds("test-rounds", run_round)

    def hand(sender: int) -> None:
        for n in range(2_000):
            rounds.hand_over((sender, n))

    senders = [threading.Thread(target=hand, args=(s,)) for s in range(8)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    rounds.close(wait=True)

    assert sorted(seen) == [(s, n) for s in range(8) for n in range(2_000)]
    for s in range(8):
        assert [n for sender, n in seen if sender == s] == list(range(2_000))
    assert threads_seen == {"test-rounds"}


def test_what_is_handed_over_while_a_round_runs_is_the_next_round() -> None:
    first_round_started = threading.Event()
    go_on = threading.Event()
    rounds_seen: list[list[int]] = []

    def run_round(items: list[int]) -> None:
        rounds_seen.append(items)
        first_round_started.set()
        go_on.wait(10)

    rounds: Rounds[int] = Rounds("test-rounds", run_round)
    rounds.hand_over(1)
    assert first_round_started.wait(10)
    for n in (2, 3, 4):
        rounds.hand_over(n)
    go_on.set()
    rounds.close(wait=True)
    assert rounds_seen == [[1], [2, 3, 4]]


def test_a_round_takes_what_was_handed_over_while_it_ran_up_to_a_close() -> None:
    first_round_started = threading.Event()
    go_on = threading.Event()
    rounds_seen: list[list[int]] = []

    def run_round(items: list[int]) -> None:
        first_round_started.set()
        go_on.wait(10)
        rounds_seen.append(items + rounds.more())
        rounds_seen.append(rounds.more())  # the close's mark was taken: nothing after it

    rounds: Rounds[int] = Rounds("test-rounds", run_round)
    rounds.hand_over(1)
    assert first_round_started.wait(10)
    for n in (2, 3):
        rounds.hand_over(n)
    rounds.close()
    rounds.hand_over(4)  # after the close: never run
    go_on.set()
    rounds.close(wait=True)
    assert rounds_seen == [[1, 2, 3], []]


def test_a_round_that_raises_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[int] = []
    failed = threading.Event()

    def run_round(items: list[int]) -> None:
        if 0 in items:
            failed.set()
            raise RuntimeError("boom")
        done.extend(items)

    rounds: Rounds[int] = Rounds("test-rounds", run_round)
    rounds.hand_over(0)
    assert failed.wait(10)
    rounds.hand_over(5)
    rounds.close(wait=True)
    assert done == [5]
    assert any(record.exc_info for record in caplog.records)


def test_close_runs_every_item_before_it_and_none_after() -> None:
    done: list[int] = []
    rounds: Rounds[int] = Rounds("test-rounds", done.extend)
    for n in range(100):
        rounds.hand_over(n)
    rounds.close(wait=True)
    rounds.hand_over(100)  # after the close: never run
    assert done == list(range(100))


def test_close_of_a_thread_never_started_returns() -> None:
    rounds: Rounds[int] = Rounds("test-rounds", lambda items: None)
    rounds.close(wait=True)


def test_a_rounds_items_are_let_go_once_it_ran() -> None:
    """The thread holds nothing of its last round while it waits for the next (the
    flusher's last database, dropped meanwhile, is freed)."""

    class Item:
        pass

    ran = threading.Event()
    rounds: Rounds[Item] = Rounds("test-rounds", lambda items: ran.set())
    item = Item()
    gone = weakref.ref(item)
    rounds.hand_over(item)
    del item
    assert ran.wait(10)
    for _ in range(100):  # the round's last steps after its run, on its own thread
        if gone() is None:
            break
        time.sleep(0.01)
    try:
        assert gone() is None
    finally:
        rounds.close(wait=True)
