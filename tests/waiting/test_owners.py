"""The pool of waiters' own work: one owner's jobs run at most its share at once, and other
owners' jobs go on meanwhile (spec: stream, a waiter's own work)."""

from __future__ import annotations

import functools
import threading
import time

from refimpl.waiting.owners import OwnerPool


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
