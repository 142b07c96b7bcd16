"""Results computed once and handed to every concurrent asker of the same key.

Readers woken by one commit mostly ask the same question (the change stream after the same
position, a live query's narrowed re-run): the first asker computes, the others wait for it,
and later askers find the result among the few most recent. A key must name everything the
result depends on, so sharing it is never wrong; an old entry is simply never asked again.
The memo is bounded in entries and, when the owner says what an entry weighs, in bytes: a
result heavier than the whole budget is handed to its concurrent askers but not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class _Pending:
    """A computation under way: its askers wait on `done`, a lock its producer holds until
    the result or the error is there. Lighter than a Future (a condition, a re-entrant
    lock and callbacks), which a reader of small pages made at every page."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None

    def wait(self) -> Any:
        """The result, once there (the error, raised, if the producer failed)."""
        with self.done:  # released by the producer when it is done
            pass
        if self.error is not None:
            raise self.error
        return self.result


class SharedResults:
    """A bounded, thread-safe memo of recent results, with in-flight computations shared."""

    def __init__(
        self,
        size: int = 256,
        max_bytes: int | None = None,
        weigh: Callable[[Any], int] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._running: dict[Hashable, _Pending] = {}
        self._size = size
        self._max_bytes = max_bytes
        self._weigh = weigh
        self._bytes = 0

    @property
    def kept_bytes(self) -> int:
        """What the kept results weigh (0 without a `weigh`)."""
        return self._bytes

    def get(self, key: Hashable, produce: Callable[[], Any]) -> Any:
        """The result for `key`, calling `produce` only if nobody has or is computing it."""
        with self._lock:
            kept = self._done.get(key)
            if kept is not None:
                self._done.move_to_end(key)
                return kept[0]
            pending = self._running.get(key)
            if pending is None:
                pending = self._running[key] = _Pending()
                producer = True
            else:
                producer = False
        if not producer:
            return pending.wait()
        try:
            result = produce()
            # Inside: a weigh that failed would otherwise leave the key's askers waiting.
            weight = self._weigh(result) if self._weigh else 0
        except BaseException as error:
            with self._lock:
                del self._running[key]
            pending.error = error
            pending.done.release()
            raise
        with self._lock:
            del self._running[key]
            if self._max_bytes is None or weight <= self._max_bytes:
                self._done[key] = (result, weight)
                self._bytes += weight
            while self._done and (
                len(self._done) > self._size
                or (self._max_bytes is not None and self._bytes > self._max_bytes)
            ):
                _, (_, dropped) = self._done.popitem(last=False)
                self._bytes -= dropped
        pending.result = result
        pending.done.release()
        return result
