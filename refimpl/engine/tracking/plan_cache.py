"""Compiled plans kept per database, each good while the schema it was made for stands.

A plan is made from a statement and the schema objects it reads. A schema change never edits
a schema in place (ALTER, DROP and CREATE make new objects), so the schema a plan was made
for is its version: `get` hands a plan out only for the very object it was stored with.
What a plan is and how its key is made belong to the query layer; this is only the bounded
store (least recently used entries go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

PLAN_CACHE_SIZE = 2048


class PlanCache:
    """At most `size` plans by key; safe to share between threads.

    A plan stored here is shared by every run of its statement, in several threads at once:
    it must hold nothing of one run (rows, the caller's rights, the run's clock).
    """

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self._size = size
        self._plans: OrderedDict[Hashable, tuple[object, object]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, version: object) -> object | None:
        """The plan stored under `key` for `version` (compared by identity), or None."""
        with self._lock:
            found = self._plans.get(key)
            if found is None or found[0] is not version:
                self.misses += 1
                return None
            self._plans.move_to_end(key)
            self.hits += 1
            return found[1]

    def put(self, key: Hashable, version: object, plan: object) -> None:
        """Keep `plan` for `key` and `version`, dropping the least recently used one if full."""
        with self._lock:
            self._plans[key] = (version, plan)
            self._plans.move_to_end(key)
            while len(self._plans) > self._size:
                self._plans.popitem(last=False)

    def __len__(self) -> int:
        return len(self._plans)
