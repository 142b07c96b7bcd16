"""What the admission tests share (`tests/engine/test_admission.py`, `tests/netpool/
test_places.py`): a text costly by its size, a wait long enough that only a hang fails it,
and a call run in a thread of its own, its result kept."""

from __future__ import annotations

import threading
from collections.abc import Callable

from refimpl.engine import admission

LARGE = "SELECT " + "1 + " * admission.LARGE_TEXT + "1"
WAIT = 10.0  # generous: only a hang fails


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """`fn` started in a daemon thread, and the list its result is put in once it returns."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out
