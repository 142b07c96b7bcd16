"""A writer's wait for its database's write lock, which another transaction holds, and the
error that ends it: the statement timeout's, or, sooner, the lock timeout's (spec: sql.md,
"Transactions")."""

from __future__ import annotations

import threading

from refimpl.engine import admission
from refimpl.errors import LockTimeout, StatementTimeout


def wait(lock: threading.Lock, database: str, timeout: float, lock_timeout: float) -> None:
    """Take `lock` within `timeout` seconds (the statement timeout), or within `lock_timeout`
    when that is shorter and not 0 (PostgreSQL's lock_timeout, 0: off); raises
    StatementTimeout or LockTimeout otherwise. The wait gives the admission place on."""
    bounded = 0 < lock_timeout < timeout
    admission.waiting()
    if lock.acquire(timeout=lock_timeout if bounded else timeout):
        return
    if bounded:
        raise LockTimeout(database, lock_timeout)
    raise StatementTimeout(
        f"waited {timeout:g} s for database '{database}', which another transaction holds;"
        " try again, or commit that transaction sooner"
    )
