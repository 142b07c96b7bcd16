"""The database's shared state lock: a reader or a commit kept waiting is let in as soon as
whoever held it out leaves (the commit's exit wakes sleepers only when there are any)."""

from __future__ import annotations

import threading
import time

from refimpl.engine.storage.locks import SharedLock


def _started(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_a_reader_waits_for_a_commit_and_gets_in_after_it() -> None:
    lock = SharedLock()
    entered = threading.Event()

    def read() -> None:
        with lock:
            entered.set()

    with lock.exclusive():
        reader = _started(read)
        assert not entered.wait(0.2)  # kept out while the commit installs
    assert entered.wait(5)
    reader.join(5)


def test_a_commit_waits_for_the_readers_and_readers_after_it_wait_for_it() -> None:
    lock = SharedLock()
    order: list[str] = []

    def commit() -> None:
        with lock.exclusive():
            order.append("commit")

    def late_reader() -> None:
        with lock:
            order.append("late reader")

    with lock:
        writer = _started(commit)
        time.sleep(0.1)  # the commit waits for this reader
        late = _started(late_reader)  # and keeps readers that come after it out
        time.sleep(0.1)
        assert order == []
    writer.join(5)
    late.join(5)
    assert order == ["commit", "late reader"]


def test_commits_one_after_another_leave_nobody_waiting() -> None:
    lock = SharedLock()
    for _ in range(3):
        with lock.exclusive():
            pass
    with lock:  # a reader gets in at once
        pass
