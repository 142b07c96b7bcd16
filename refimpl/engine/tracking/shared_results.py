"""Results computed once and handed to every concurrent asker of the same key.

Readers woken by one commit mostly ask the same question (the change stream after the same
position, a live query's narrowed re-run): the first asker computes, the others wait for it,
and later askers find the result among the few most recent. A key must name everything the
result depends on, so sharing it is never wrong; an old entry is simply never asked again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any


class SharedResults:
    """A bounded, thread-safe memo of recent results, with in-flight computations shared."""

    def __init__(self, size: int = 256) -> None:
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, Any] = OrderedDict()
        self._running: dict[Hashable, Future[Any]] = {}
        self._size = size

    def get(self, key: Hashable, produce: Callable[[], Any]) -> Any:
        """The result for `key`, calling `produce` only if nobody has or is computing it."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
            future = self._running.get(key)
            producer = future is None
            if producer:
                future = Future()
                self._running[key] = future
        assert future is not None
        if not producer:
            return future.result()
        try:
            result = produce()
        except BaseException as error:
            with self._lock:
                del self._running[key]
            future.set_exception(error)
            raise
        with self._lock:
            del self._running[key]
            self._done[key] = result
            if len(self._done) > self._size:
                self._done.popitem(last=False)
        future.set_result(result)
        return result
