"""The pool of waiters' own work: one owner's jobs run at most its share at once, and other
owners' jobs go on meanwhile (spec: stream, a waiter's own work)."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time

import pytest

from refimpl.errors import StatementTimeout
from refimpl.waiting.owners import Offloaded, OwnerPool
from refimpl.waiting.parked import Kind, Parked


def test_one_owners_slow_jobs_leave_the_other_threads_to_others() -> None:
    pool = OwnerPool(threads=2, per_owner=1)
    release = threading.Event()
    started: list[str] = []
    done = threading.Event()

    def hostile(n: int) -> None:
        started.append(f"hostile{n}")
        release.wait(10)

    def victim() -> None:
        started.append("victim")
        done.set()

    try:
        for n in range(5):
            pool.submit("hostile", functools.partial(hostile, n))
        pool.submit("victim", victim)
        assert done.wait(5), started
        assert pool.running("hostile") == 1  # its share; its other jobs queue behind it
        assert started == ["hostile0", "victim"]
    finally:
        release.set()
        pool.close()


def test_an_owners_queued_jobs_all_run_in_turn() -> None:
    pool = OwnerPool(threads=2, per_owner=1)
    ran: list[int] = []
    try:
        for n in range(4):
            pool.submit("one", functools.partial(ran.append, n))
        deadline = time.monotonic() + 5
        while len(ran) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == [0, 1, 2, 3]
    finally:
        pool.close()


def _hold(release: threading.Event) -> None:
    release.wait(10)


def test_an_owner_with_nothing_running_is_served_while_two_others_keep_work_queued() -> None:
    pool = OwnerPool()  # the server's pool, as the waiting room makes it
    release = threading.Event()
    served = threading.Event()
    try:
        for hostile in ("hostile1", "hostile2"):
            for _ in range(3):
                pool.submit(hostile, functools.partial(_hold, release))
        pool.submit("victim", served.set)
        assert served.wait(5)
        assert pool.running("hostile1") == 1 and pool.running("hostile2") == 1
        assert pool.threads() == 3  # a thread for each owner that could run; none more
    finally:
        release.set()
        pool.close()


def test_past_its_threads_owners_take_turns_in_the_order_their_work_came() -> None:
    pool = OwnerPool(threads=1)
    release = threading.Event()
    ran: list[str] = []
    try:
        pool.submit("a", functools.partial(_hold, release))
        deadline = time.monotonic() + 5
        while not pool.running("a") and time.monotonic() < deadline:
            time.sleep(0.01)  # a's first job runs before the others come
        for job in ("a2", "a3", "c"):
            pool.submit(job[0], functools.partial(ran.append, job))
        assert pool.threads() == 1
        release.set()
        deadline = time.monotonic() + 5
        while len(ran) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == ["a2", "c", "a3"]  # c's turn comes before a's third job
    finally:
        pool.close()


def test_idle_threads_end_and_new_work_starts_one_again() -> None:
    pool = OwnerPool(idle_seconds=0.1)
    ran = threading.Event()
    try:
        pool.submit("one", lambda: None)
        deadline = time.monotonic() + 5
        while pool.threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pool.threads() == 0
        pool.submit("one", ran.set)
        assert ran.wait(5)
    finally:
        pool.close()


class _Work:
    """A piece of a waiter's work that runs until released, then makes `result` (or raises
    it); counts its runs."""

    def __init__(self, result: object) -> None:
        self.result = result
        self.release = threading.Event()
        self.runs = 0

    def __call__(self, _lsn: int) -> str | None:
        self.runs += 1
        self.release.wait(10)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result  # type: ignore[return-value]


def _offloaded(work: _Work) -> tuple[Offloaded[str], OwnerPool, threading.Event]:
    pool = OwnerPool(threads=1)
    redone = threading.Event()
    offloaded: Offloaded[str] = Offloaded(
        pool, lambda _parked: redone.set(), "owner", contextlib.nullcontext, work
    )
    parked: Parked[str] = Parked(
        None, 0, offloaded, lambda: None, math.inf, lambda: None, kind=Kind.LIVE
    )
    offloaded.bind(parked)
    return offloaded, pool, redone


@pytest.mark.parametrize("result", ["found", None])
def test_a_deadline_during_a_piece_of_work_waits_for_what_it_makes(result: str | None) -> None:
    work = _Work(result)
    offloaded, pool, redone = _offloaded(work)
    try:
        assert offloaded(1) is None  # the piece starts
        assert offloaded.at_deadline(lambda: "nothing new") is None  # it runs: wait for it
        work.release.set()
        assert redone.wait(5)  # its end asks for an attempt, whatever it made
        assert offloaded(2) == (result or "nothing new")
        assert offloaded(3) == "nothing new"  # and no other piece starts
        assert work.runs == 1
    finally:
        pool.close()


def test_a_piece_over_its_budget_at_the_deadline_answers_its_error() -> None:
    work = _Work(StatementTimeout.ran_too_long())
    offloaded, pool, redone = _offloaded(work)
    try:
        assert offloaded(1) is None
        assert offloaded.at_deadline(lambda: "nothing new") is None
        work.release.set()
        assert redone.wait(5)
        with pytest.raises(StatementTimeout):
            offloaded(2)
    finally:
        pool.close()


def test_a_deadline_with_no_piece_running_answers_the_fallback_at_once() -> None:
    work = _Work("found")
    offloaded, pool, _ = _offloaded(work)
    try:
        assert offloaded.at_deadline(lambda: "nothing new") == "nothing new"
        assert work.runs == 0
    finally:
        pool.close()
