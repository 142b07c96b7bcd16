"""The wake board: a commit wakes the waiters of what it touched, and a commit of a table no
one waits on does not wait for the board's lock (every commit notifies)."""

from __future__ import annotations

import threading
from collections.abc import Callable

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


class _Log:
    """A log whose commits are durable only when the test says (`WakeBoard.register`'s
    `durable`)."""

    def __init__(self) -> None:
        self.last_lsn = 7
        self.kept: list[tuple[int, Callable[[], object]]] = []

    def when_durable(self, lsn: int, call: Callable[[], object]) -> bool:
        self.kept.append((lsn, call))
        return True


def test_a_board_given_its_log_wakes_a_commits_waiters_once_it_is_durable_in_one_call() -> None:
    board, log = WakeBoard(), _Log()
    first, second, other = (threading.Event() for _ in range(3))
    board.register("t", "A", first, log)
    board.register("t", "A", second)
    board.register("t", "B", other)
    board.notify("t", frozenset({"A"}), False)
    assert not first.is_set() and not second.is_set()
    assert len(log.kept) == 1 and log.kept[0][0] == 7  # the commit's LSN, one call for both
    log.kept[0][1]()  # the flush made it durable
    assert first.is_set() and second.is_set() and not other.is_set()
    board.notify("u", frozenset({"A"}), False)  # no one waits on the table: nothing kept
    assert len(log.kept) == 1


class _Broken:
    def set(self) -> None:
        raise RuntimeError("a waker's bug")


def test_a_wakers_failure_neither_keeps_the_others_asleep_nor_fails_the_flush() -> None:
    board, log = WakeBoard(), _Log()
    before, after = threading.Event(), threading.Event()
    board.register("t", "A", before, log)
    board.register("t", "A", _Broken())
    board.register("t", "A", after)
    board.notify("t", frozenset({"A"}), False)
    log.kept[0][1]()  # the flush's leader makes the call: it does not raise
    assert before.is_set() and after.is_set()
