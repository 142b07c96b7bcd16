"""A writer's wait for a write lock another transaction holds: ended by the lock timeout
when it is set and shorter than the statement timeout (LockTimeout, PostgreSQL's 55P03),
else by the statement timeout (StatementTimeout, as before); a lock let go meanwhile is
taken. Short timeouts; no bound on how soon anything happens."""

from __future__ import annotations

import threading

import pytest

from refimpl.engine.storage.lock_waits import wait
from refimpl.errors import LockTimeout, StatementTimeout


def held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


def test_a_shorter_lock_timeout_ends_the_wait_with_its_own_error() -> None:
    with pytest.raises(LockTimeout) as raised:
        wait(held(), "demo", timeout=30.0, lock_timeout=0.05)
    message = raised.value.message
    assert message.startswith("canceling statement due to lock timeout: waited 50 ms")
    assert "database 'demo'" in message and "raise lock_timeout" in message


@pytest.mark.parametrize("lock_timeout", [0.0, 0.05, 5.0])
def test_without_one_or_one_no_shorter_the_statement_timeout_ends_it(lock_timeout: float) -> None:
    with pytest.raises(StatementTimeout, match="waited 0.05 s for database 'demo'"):
        wait(held(), "demo", timeout=0.05, lock_timeout=lock_timeout)


def test_a_lock_let_go_while_waiting_is_taken() -> None:
    lock = held()
    threading.Timer(0.05, lock.release).start()
    wait(lock, "demo", timeout=30.0, lock_timeout=20.0)
    assert lock.locked()
