"""Log lines written by one thread while a server runs: a request's thread only queues them.

Every answered request has a log line (`refimpl.http.request_log`). Written by the thread
that answers, it costs that thread the handler's lock and a write to stderr while it holds
one of the few admission places (`refimpl.engine.admission`): under 16 clients a third of
the places' time went to waiting for the lock and the write, time in which nobody else was
answered. `queued_log()` puts the root logger's handlers behind a queue for as long as the
server runs: a record is queued as it is made, and one writer thread formats and writes the
queued records every WRITE_EVERY_SECONDS, in the order they were made. At the end the queue
is written out and the handlers go back, so no line is lost and lines logged afterwards are
written at once again.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence

# How long a line may wait to be written. The writer wakes on this clock, not at each
# record: a wake-up per record (a blocking queue's) cost a fifth of a point SELECT's time.
WRITE_EVERY_SECONDS = 0.02
# Records waiting to be written. A stderr that stops taking lines holds the loggers up once
# this many wait, as it would without the queue, instead of growing memory without bound.
MAX_QUEUED = 10_000


class _Queued(logging.Handler):
    """Queues records as they are made; `_Writer` formats and writes them."""

    def __init__(self, records: collections.deque[logging.LogRecord]) -> None:
        super().__init__()
        self._records = records

    def handle(self, record: logging.LogRecord) -> bool:
        # No lock and no formatting here: a deque's append is safe between threads, and
        # the arguments of our lines are strings and numbers, which cannot change before
        # the writer formats them.
        while len(self._records) >= MAX_QUEUED:
            time.sleep(WRITE_EVERY_SECONDS)
        self._records.append(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


class _Writer:
    """The thread that hands queued records to the real handlers, oldest first."""

    def __init__(self, handlers: Sequence[logging.Handler]) -> None:
        self.records: collections.deque[logging.LogRecord] = collections.deque()
        self._handlers = list(handlers)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kdb-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WRITE_EVERY_SECONDS):
            self._write_out()
        self._write_out()

    def _write_out(self) -> None:
        while self.records:
            record = self.records.popleft()
            for handler in self._handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)

    def stop(self) -> None:
        """Write out what is queued, then end the thread."""
        self._stop.set()
        self._thread.join()
        self._write_out()  # what a thread queued while the writer ended


@contextlib.contextmanager
def queued_log() -> Iterator[None]:
    """While inside, the root logger's records are written by one writer thread."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    if not handlers:
        yield
        return
    writer = _Writer(handlers)
    root.handlers = [_Queued(writer.records)]
    try:
        yield
    finally:
        root.handlers = handlers
        writer.stop()
