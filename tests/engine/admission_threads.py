"""What the admission tests share (`tests/engine/test_admission.py`, `tests/netpool/
test_places.py`): a text costly by its size, a wait long enough that only a hang fails it,
a call run in a thread of its own, its result kept, and a costly request asking for its place."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from refimpl.engine import admission
from refimpl.netpool.places import FifoSlots

LARGE = "SELECT " + "1 + " * admission.LARGE_TEXT + "1"
WAIT = 10.0  # generous: only a hang fails


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """`fn` started in a daemon thread, and the list its result is put in once it returns."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def costly_request(slots: FifoSlots) -> Callable[[], bool]:
    """A request that takes an ordinary place of `slots`, is found costly by its text and
    asks for a long place (True once it has one), then ends."""

    def costly() -> bool:
        slots.acquire()
        admission.admitted(slots.release, slots)
        ok = admission.before_statements(LARGE, time.monotonic() + WAIT)
        admission.request_ended()
        return ok

    return costly
