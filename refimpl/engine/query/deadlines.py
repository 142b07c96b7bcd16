"""The running statement's deadline, for the evaluation loops one value can keep busy.

Most of a statement's time goes by rows, and the scans stop it at its deadline between
rows (`relations.bounded`). But one row's expression can take long by itself when the client
chooses the sizes (a LIKE of a 4 KB pattern over a 100 KB text): such a loop calls `check`
every so often. Plans are shared between runs and threads, so the deadline is not compiled
into them; `Session.execute` makes the running session known to its thread (`running`),
and `check` asks it for the statement's deadline. Outside a statement (a caller that is not
a session, a thread of its own) `check` does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from refimpl.errors import StatementTimeout


class DeadlineSource(Protocol):
    """Who knows when the running statement must stop (a session)."""

    def statement_deadline(self) -> float | None:
        """time.monotonic() at which the running statement stops; None: no statement."""
        ...


_current: ContextVar[DeadlineSource | None] = ContextVar("statement_deadline", default=None)


@contextmanager
def running(source: DeadlineSource) -> Iterator[None]:
    """While inside, `check` on this thread stops at `source`'s statement deadline."""
    token = _current.set(source)
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """StatementTimeout when the running statement is past its deadline."""
    source = _current.get()
    if source is None:
        return
    deadline = source.statement_deadline()
    if deadline is not None and time.monotonic() > deadline:
        raise StatementTimeout.ran_too_long()
