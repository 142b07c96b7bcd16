"""A job of the owner pool that raises (a live-query stream's part handed over after the
stream ended, say) costs that job only: the pool's thread goes on, and later jobs run."""

from __future__ import annotations

import threading

from refimpl.waiting.owners import OwnerPool


def test_a_job_that_raises_leaves_the_pool_running_later_jobs() -> None:
    pool = OwnerPool(threads=1, per_owner=1)
    failed = threading.Event()

    def broken() -> None:
        failed.set()
        raise RuntimeError("a bug in a job")

    ran: list[str] = []
    done = threading.Event()

    def later(owner: str) -> None:
        ran.append(owner)
        if len(ran) == 2:
            done.set()

    try:
        pool.submit("u", broken)
        assert failed.wait(5)
        pool.submit("u", lambda: later("u"))
        pool.submit("v", lambda: later("v"))
        # Before, the thread ended with the exception while the pool still counted it
        # idle: no thread was started again, and these jobs never ran.
        assert done.wait(5), ran
        assert sorted(ran) == ["u", "v"]
        assert pool.threads() == 1
    finally:
        pool.close()
