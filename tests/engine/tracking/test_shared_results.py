"""Shared results: one computation per key among concurrent askers, a memo bounded in entries
and in bytes. A property: whatever the sequence of asks, every answer is what the key's
producer makes, and the kept results never weigh more than the budget."""

from __future__ import annotations

import functools
import sys
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.tracking.shared_results import SharedResults


def test_concurrent_askers_share_one_computation() -> None:
    shared: SharedResults = SharedResults()
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def produce() -> str:
        calls.append(1)
        started.set()
        release.wait(5)
        return "done"

    answers: list[str] = []
    first = threading.Thread(target=lambda: answers.append(shared.get("k", produce)))
    first.start()
    started.wait(5)
    second = threading.Thread(target=lambda: answers.append(shared.get("k", produce)))
    second.start()
    release.set()
    first.join(5)
    second.join(5)
    assert answers == ["done", "done"] and calls == [1]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=60), st.integers(1, 100))
def test_the_memo_keeps_to_its_byte_budget(asks: list[tuple[int, int]], budget: int) -> None:
    shared: SharedResults = SharedResults(size=4, max_bytes=budget, weigh=len)
    made: dict[int, bytes] = {}
    for key, weight in asks:
        made.setdefault(key, bytes(weight))
        assert shared.get(key, functools.partial(made.__getitem__, key)) == made[key]
        assert shared.kept_bytes <= budget


def test_a_result_heavier_than_the_budget_is_answered_but_not_kept() -> None:
    shared: SharedResults = SharedResults(max_bytes=10, weigh=len)
    calls: list[int] = []

    def produce() -> bytes:
        calls.append(1)
        return bytes(11)

    assert shared.get("big", produce) == bytes(11)
    assert shared.get("big", produce) == bytes(11)
    assert calls == [1, 1] and shared.kept_bytes == 0


def test_a_failed_computation_fails_its_concurrent_askers_and_is_not_kept() -> None:
    shared: SharedResults = SharedResults()
    started, release = threading.Event(), threading.Event()

    def fail() -> str:
        started.set()
        release.wait(5)
        raise ValueError("no answer")

    outcomes: list[str] = []
    calls: list[int] = []

    def counted() -> str:
        calls.append(1)
        return fail()

    def ask() -> None:
        try:
            outcomes.append(shared.get("k", counted))
        except ValueError as error:
            outcomes.append(f"failed: {error}")

    first = threading.Thread(target=ask)
    first.start()
    started.wait(5)
    second = threading.Thread(target=ask)
    second.start()
    deadline = time.monotonic() + 10
    while not _waiting(second) and time.monotonic() < deadline:  # it waits for the first
        time.sleep(0.01)
    release.set()
    first.join(5)
    second.join(5)
    assert outcomes == ["failed: no answer", "failed: no answer"] and calls == [1]
    assert shared.get("k", lambda: "made again") == "made again"


def _waiting(thread: threading.Thread) -> bool:
    """Whether the thread waits for another's computation (inside `_Pending.wait`)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "wait" and "shared_results" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def test_a_weigh_that_fails_fails_its_asker_and_leaves_the_key_free() -> None:
    def weigh(result: str) -> int:
        if result == "unweighable":
            raise ValueError("cannot weigh")
        return len(result)

    shared: SharedResults = SharedResults(max_bytes=100, weigh=weigh)
    try:
        shared.get("k", lambda: "unweighable")
    except ValueError as error:
        assert str(error) == "cannot weigh"
    else:
        raise AssertionError("the weigh's error was not raised")
    answers: list[str] = []
    asker = threading.Thread(target=lambda: answers.append(shared.get("k", lambda: "fine")))
    asker.start()
    asker.join(5)
    assert answers == ["fine"]  # before, the key stayed "running" and its askers waited forever
