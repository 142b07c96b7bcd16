"""Telling a thread pool that a request is about to wait, or has run long.

A server may admit only a few requests at a time to run Python code, because under the
interpreter lock more running threads do not mean more work done, only longer queues
behind the lock (16 requests sharing it finish together, late; 2 at a time finish in
turn). Such a server gives each admitted thread a way to hand its place on (`hand_on`), and
a way to take one of its few places for costly requests (`go_long`). The engine calls
`waiting()` before it blocks (a commit waiting for its flush, a reader waiting for a lock or
a commit), `running_long()` from long loops, and `before_statements()` where a request may
wait for a place (the start of a session's `execute`, outside a transaction).

Costly requests run on the long places: at most all places but one, so the cheap requests
always have a place of their own. A request is costly when its SQL text is large, when a
text of the same shape (the same text but for its constants: `statement_shape`) ran long
lately, or once it has run LONG_SECONDS. A request found costly at
`before_statements` waits there for a long place, in order, behind none of the cheap ones.
One found costly in a long loop (`running_long`) takes a long place if one is free, else
hands its place on and carries on without one: it may hold an engine lock there, and a
thread never waits for a place while holding one (a commit waiting for that lock would keep
new readers out all that while). Its shape is remembered, so that the next time it waits at
`before_statements` instead. Without a server that admits, all of this costs next to nothing.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Protocol

from refimpl.errors import StatementCancelled

LONG_SECONDS = 0.01  # a request running longer than this makes way for the others
# SQL texts longer than this (characters) are costly before they run: their parse alone
# takes tens of milliseconds of the interpreter lock.
LARGE_TEXT = 32 * 1024
REMEMBERED_SHAPES = 1024  # how many shapes of texts that ran long are remembered as costly
# The constants of a text: strings (quotes doubled inside) and numbers not part of a name.
_CONSTANTS = re.compile(r"'(?:[^']|'')*'|(?<![\w.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def statement_shape(text: str) -> int:
    """A key equal for texts that differ only in their constants: `... WHERE id = 1` and
    `... WHERE id = 2` cost alike, so one that ran long marks the other costly too."""
    if len(text) <= SHORT_TEXT:
        return _short_shape(text)
    return hash(_CONSTANTS.sub("?", text))


# A prepared statement's text comes back at each of its runs: its shape is looked up rather
# than made again. Only short texts are kept, so the cache holds at most a few hundred KB.
SHORT_TEXT = 512


@functools.lru_cache(maxsize=1024)
def _short_shape(text: str) -> int:
    return hash(_CONSTANTS.sub("?", text))


class CostlyShapes:
    """A server's memory of the statement shapes that ran long lately, the least recently
    seen forgotten first. Safe to share between threads."""

    def __init__(self, size: int = REMEMBERED_SHAPES) -> None:
        self._lock = threading.Lock()
        self._size = size
        self._seen: OrderedDict[int, None] = OrderedDict()
        # The shapes remembered, read without a lock: one not in it did not run long lately
        # (one dict look-up, atomic, where `in` is a Python call before its own look-up).
        self.remembered: Mapping[int, None] = self._seen

    def add(self, key: int) -> None:
        with self._lock:
            self._seen[key] = None
            self._seen.move_to_end(key)
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def __contains__(self, key: int) -> bool:
        if key not in self._seen:  # one dict lookup, atomic: the cheap path takes no lock
            return False
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
        return True


class LongPlaces(Protocol):
    """A server's places for costly requests (refimpl.netpool.places), and
    its memory of what turned out costly."""

    costly: CostlyShapes

    def to_long(self, holding: bool, timeout: float | None) -> bool:
        """True once the caller holds a long place; its ordinary one (`holding`) goes on."""
        ...

    def release_long(self) -> None: ...


class _Held(threading.local):
    """What the calling thread holds. A thread never admitted (a log's flusher, the
    protocol's acknowledging thread) reads these class defaults: a name it never set made
    `getattr(_local, name, None)` raise and catch an AttributeError in C, at every flush."""

    hand_on: Callable[[], None] | None = None
    long_places: LongPlaces | None = None
    long_release: Callable[[], None] | None = None
    cancel: threading.Event | None = None


_local = _Held()


def admitted(hand_on: Callable[[], None], long_places: LongPlaces | None = None) -> None:
    """The calling thread holds a place; `hand_on` gives it back (called at most once)."""
    _local.hand_on = hand_on
    _local.long_places = long_places
    _local.long_release = None
    request_started()


def request_started() -> None:
    """A request starts on the calling thread: its running time counts from now."""
    _local.since = time.monotonic()
    _local.text_key = None


def holding() -> bool:
    """True while the calling thread holds the ordinary place it was admitted with."""
    return getattr(_local, "hand_on", None) is not None and _local.long_release is None


def before_statements(text: str, deadline: float | None, shape: int | None = None) -> bool:
    """A safe point before `text` runs (no engine lock held): a costly text waits here.

    `shape` is the text's shape when the caller has one already (the hash of its template,
    `refimpl.sql.templates`: its constants made `?`), else `statement_shape(text)`.
    Answers False when `deadline` passed before it could run (the caller stops the
    statement).
    """
    places = getattr(_local, "long_places", None)
    if places is None or _local.long_release is not None:
        return True  # no admission, or on a long place already
    if len(text) <= LARGE_TEXT:
        key = statement_shape(text) if shape is None else shape
        costly = places.costly
        if key not in costly.remembered or key not in costly:
            _local.text_key = key  # remembered if it runs long
            return True
    if _local.hand_on is None:
        # Its place went on earlier in this request (a commit waited for its flush; a
        # protocol client's pipeline runs many statements in one request): it carries on
        # without one, as a request found costly in `running_long` does. Waiting here
        # could wait for ever: idle workers keep their places while they poll, so no
        # place would come free for it.
        return True
    timeout = None
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            return False  # stopped before it runs: it keeps its place for the answer
    _local.hand_on = None
    if places.to_long(True, timeout):
        _local.hand_on = _local.long_release = places.release_long
        return True
    return False


def waiting() -> None:
    """The calling thread is about to block: its place, if it holds one, goes to another."""
    hand_on = getattr(_local, "hand_on", None)
    if hand_on is not None:
        _local.hand_on = None
        _local.long_release = None
        hand_on()


def watch_cancel(flag: threading.Event | None) -> None:
    """Statements on the calling thread stop, at their next `running_long`, once `flag` is
    set (a protocol's cancel request); None: stop watching."""
    _local.cancel = flag


def running_long() -> None:
    """Called now and then from long loops (never a wait): a long request makes way.

    Also the point where a cancelled statement stops, with StatementCancelled.
    """
    cancel = getattr(_local, "cancel", None)
    if cancel is not None and cancel.is_set():
        cancel.clear()
        raise StatementCancelled()
    hand_on = getattr(_local, "hand_on", None)
    if hand_on is None or _local.long_release is not None:
        return
    if time.monotonic() - _local.since <= LONG_SECONDS:
        return
    places = _local.long_places
    if _local.text_key is not None and places is not None:
        places.costly.add(_local.text_key)
        _local.text_key = None
    _local.hand_on = None
    if places is None:
        hand_on()
    elif places.to_long(True, 0.0):
        _local.hand_on = _local.long_release = places.release_long
    # else: its place went on, and it carries on without one


def request_ended() -> None:
    """The request on the calling thread has ended: a long place goes back at once."""
    if getattr(_local, "long_release", None) is not None:
        done()


def done() -> None:
    """The request has ended: give the place back if it is still held."""
    waiting()
