"""The running statement's deadline, for the evaluation loops one value can keep busy.

Most of a statement's time goes by rows, and the scans stop it at its deadline between
rows (`relations.bounded`). But one row's expression can take long by itself when the client
chooses the sizes (a LIKE of a 4 KB pattern over a 100 KB text): such a loop calls `check`
every so often. Plans are shared between runs and threads, so the deadline is not compiled
into them; `Session.execute` makes the running session known to its thread (`running`),
and `check` asks it for the statement's deadline. Outside a statement (a caller that is not
a session, a thread of its own) `check` does nothing.

`make_way` is for long work that holds no lock (an answer's encoding, a copy page's keys):
its steps are C calls of a chunk each, and a thread waiting for the interpreter lock gets it
only after a switch interval, at each step of its own (a commit has many); so the work
lets the lock go for a moment now and then.
"""

from __future__ import annotations

import threading
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


# Long work lets the interpreter lock go for TURN_PAUSE_SECONDS after each TURN_SECONDS of
# its steps (`make_way`), as a waiter's own work does.
TURN_SECONDS = 0.002
TURN_PAUSE_SECONDS = 0.0001

_turns = threading.local()


def make_way() -> None:
    """Called between the steps of long work that holds no lock: after each TURN_SECONDS
    since the calling thread's last pause, a pause of TURN_PAUSE_SECONDS (the interpreter
    lock let go), so that threads answering others run meanwhile. Never inside a lock that
    others wait for: the pause would make them wait longer."""
    now = time.monotonic()
    due = getattr(_turns, "due", None)
    if due is None:
        _turns.due = now + TURN_SECONDS
    elif now >= due:
        time.sleep(TURN_PAUSE_SECONDS)
        _turns.due = time.monotonic() + TURN_SECONDS
