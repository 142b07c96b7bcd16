"""Telling a thread pool that a request is about to wait, or has run long.

A server may admit only a few requests at a time to run Python code, because under the
interpreter lock more running threads do not mean more work done, only longer queues
behind the lock (16 requests sharing it finish together, late; 2 at a time finish in
turn). Such a server gives each admitted thread a way to hand its place on: `hand_on`. The
engine calls `waiting()` before it blocks (a commit waiting for its flush, a reader waiting
for a lock or a commit) and `running_long()` from long loops, so that a waiting or long
request does not keep others out. Without a server that admits, both cost next to nothing.

A thread that handed its place on carries on without one: places are only taken when a
request starts, so no thread ever waits for a place while holding an engine lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

LONG_SECONDS = 0.01  # a request running longer than this makes way for the others

_local = threading.local()


def admitted(hand_on: Callable[[], None]) -> None:
    """The calling thread holds a place; `hand_on` gives it back (called at most once)."""
    _local.hand_on = hand_on
    _local.since = time.monotonic()


def holding() -> bool:
    """True while the calling thread holds the place it was admitted with."""
    return getattr(_local, "hand_on", None) is not None


def waiting() -> None:
    """The calling thread is about to block: its place, if it holds one, goes to another."""
    hand_on = getattr(_local, "hand_on", None)
    if hand_on is not None:
        _local.hand_on = None
        hand_on()


def running_long() -> None:
    """Called now and then from long loops: after LONG_SECONDS the place goes to another."""
    hand_on = getattr(_local, "hand_on", None)
    if hand_on is not None and time.monotonic() - _local.since > LONG_SECONDS:
        _local.hand_on = None
        hand_on()


def done() -> None:
    """The request has ended: give the place back if it is still held."""
    waiting()
