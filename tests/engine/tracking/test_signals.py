"""The wake board: a commit wakes the waiters of what it touched, and a commit of a table no
one waits on does not wait for the board's lock (every commit notifies)."""

from __future__ import annotations

import threading

from refimpl.engine.tracking.signals import WakeBoard


def test_a_commit_wakes_the_waiters_of_its_values_and_of_the_whole_table() -> None:
    board = WakeBoard()
    of_a, of_b, of_any, elsewhere = (threading.Event() for _ in range(4))
    board.register("t", "A", of_a)
    board.register("t", "B", of_b)
    board.register("t", None, of_any)
    board.register("u", None, elsewhere)
    board.notify("t", frozenset({"A"}), False)
    assert (of_a.is_set(), of_b.is_set(), of_any.is_set(), elsewhere.is_set()) == (
        True,
        False,
        True,
        False,
    )
    board.notify("t", frozenset(), True)
    assert of_b.is_set() and not elsewhere.is_set()
    board.unregister("u", None, elsewhere)
    board.notify("u", frozenset(), True)
    assert not elsewhere.is_set()


def test_a_commit_of_a_table_no_one_waits_on_takes_no_lock() -> None:
    board = WakeBoard()
    board.register("watched", None, threading.Event())
    done = threading.Event()

    def commit() -> None:
        board.notify("t", frozenset({1}), False)
        done.set()

    with board._lock:  # held, as by a waiter registering on another table
        notifier = threading.Thread(target=commit)
        notifier.start()
        assert done.wait(5), "the commit waited for the board's lock"
    notifier.join()
