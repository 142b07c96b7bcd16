"""The result cache: SELECT answers kept while the revisions they depend on stand still.

An answer is stored with the revision counter it was computed under: the pinned value's
(a WHERE that fixes the table's rev column to one value) or the table's. It is served only
while that counter is unchanged. The counter is read *before* the query runs and moves only
*after* a commit is installed, so an answer is never older than its counter: the cache
never serves a stale answer. Memory is bounded by an estimate of the answers' size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

_CELL_BYTES = 48
_ENTRY_BYTES = 400


@dataclass(slots=True)
class _Entry:
    token: int
    value: Any
    size: int


class ResultCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, _Entry] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: Any, token: int) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.token != token:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry.value

    def put(self, key: Any, token: int, value: Any, cells: int) -> None:
        size = _ENTRY_BYTES + cells * _CELL_BYTES
        if size > self.max_bytes // 4:
            return  # one answer may not take over the cache
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[key] = _Entry(token, value, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.size
                self.evictions += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "entries": len(self._entries),
                "bytes": self._bytes,
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
            }
