"""Wake-ups of the readers that stream a database's commits (one per replication client).

A database's commit signal takes listeners for good; this module listens once per database
and passes each advance on to the callbacks registered now, so that a client that ends
leaves nothing behind.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from refimpl.engine.storage.database import Database

_LOCK = threading.Lock()
_WAITERS: weakref.WeakKeyDictionary[Database, set[Callable[[], None]]] = weakref.WeakKeyDictionary()


def listen(database: Database, callback: Callable[[], None]) -> None:
    """Call `callback` (cheap, never blocking) after each durable commit of `database`."""
    with _LOCK:
        waiters = _WAITERS.get(database)
        if waiters is None:
            waiters = _WAITERS[database] = set()
            ref = weakref.ref(database)
            database.commits.listen(lambda: _wake(ref))
        waiters.add(callback)


def forget(database: Database, callback: Callable[[], None]) -> None:
    with _LOCK:
        _WAITERS.get(database, set()).discard(callback)


def _wake(ref: weakref.ref[Database]) -> None:
    database = ref()
    if database is None:
        return
    with _LOCK:
        callbacks = list(_WAITERS.get(database, ()))
    for callback in callbacks:
        callback()
