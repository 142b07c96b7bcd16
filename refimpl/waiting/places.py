"""Wait places shared fairly by user.

A server lets only so many requests wait at once (its wait places: a quarter of its
threads, for long polls and live queries together); a request that finds none free is
answered at once with what there is. One user must not take them all, or every other
user's `wait=` becomes a busy loop. The share: a user holding `k` places takes another
only while more than `k` are free. The first place needs one free; one user alone holds at
most half of them, and the last free place always goes to a user holding none. Anonymous
callers count as one user. A request over its user's share is answered as one that finds
every place taken: at once, with what there is. The admin user (`ADMIN_OWNER`) is held to
no share: it takes any free place, as PostgreSQL keeps places for its superusers; its
clients are the operator's own (the conformance suite waits in many examples at once).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

ADMIN_OWNER = object()  # the owner that takes any free place (see the module docstring)


def place_owner(user: str | None, is_admin: bool) -> Hashable:
    """Whose share a request's wait counts against: its user's (None: anonymous callers),
    or no share for the admin user."""
    return ADMIN_OWNER if is_admin else user


class FairPlaces:
    """The fair share (see the module docstring) over a server's `places`.

    It takes every free place of `places` when made and hands them out itself, under one
    lock: a take and its give-back cost two holds of a plain lock, where the semaphore's
    acquire, release and the share's look around them cost a long poll's request and its
    answer about 10 us (its Condition is Python code). The places are then this object's
    alone: every user of them goes through it (`WaitingRoom.wait_places`)."""

    def __init__(self, places: threading.BoundedSemaphore) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, int] = {}
        free = 0
        while places.acquire(blocking=False):
            free += 1
        self._free = free

    def take(self, owner: Hashable) -> bool:
        """A place for `owner` (give it back with `give_back`), or False at once."""
        with self._lock:
            held = self._held.get(owner, 0)
            # More than `held` free (any free for the admin user): one of them is its.
            if self._free <= (0 if owner is ADMIN_OWNER else held):
                return False
            self._free -= 1
            self._held[owner] = held + 1
            return True

    def give_back(self, owner: Hashable) -> None:
        with self._lock:
            left = self._held.get(owner, 0) - 1
            if left > 0:
                self._held[owner] = left
            else:
                self._held.pop(owner, None)
            self._free += 1

    def held(self, owner: Hashable) -> int:
        """How many places `owner` holds now."""
        with self._lock:
            return self._held.get(owner, 0)
