"""Waiting in a test for what another thread or process makes true."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], seconds: float = 5.0, step: float = 0.005) -> bool:
    """Whether `condition()` comes true within `seconds` (asked every `step` seconds)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return False
