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
