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

A request's line is not even a `LogRecord` when it is queued: `LogQueue.put` takes a
`LineLater` (plain fields; `refimpl.http.request_log.RequestLine`) that the writer turns into
its record, in its place among the others. The writer hands a stream handler its records as
one write and one flush per round, not one per line.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

# How long a line may wait to be written. The writer wakes on this clock, not at each
# record: a wake-up per record (a blocking queue's) cost a fifth of a point SELECT's time.
WRITE_EVERY_SECONDS = 0.02
# Records waiting to be written. A stderr that stops taking lines holds the loggers up once
# this many wait, as it would without the queue, instead of growing memory without bound.
MAX_QUEUED = 10_000
# Records a round writes at most: a round's batch is held in memory, formatted.
BATCH = 1_000


class LineLater(Protocol):
    """A line queued as plain fields: the writer makes its record."""

    def record(self) -> logging.LogRecord: ...


class LogQueue:
    """The queue of records and lines waiting for the writer, oldest first."""

    def __init__(self) -> None:
        self.items: collections.deque[logging.LogRecord | LineLater] = collections.deque()

    def put(self, item: logging.LogRecord | LineLater) -> None:
        # No lock and no formatting here: a deque's append is safe between threads, and
        # the arguments of our lines are strings and numbers, which cannot change before
        # the writer formats them.
        while len(self.items) >= MAX_QUEUED:
            time.sleep(WRITE_EVERY_SECONDS)
        self.items.append(item)


class _Queued(logging.Handler):
    """Queues records as they are made; `_Writer` formats and writes them."""

    def __init__(self, queue: LogQueue) -> None:
        super().__init__()
        self._queue = queue

    def handle(self, record: logging.LogRecord) -> bool:
        self._queue.put(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


class _Writer:
    """The thread that hands queued records to the real handlers, oldest first."""

    def __init__(self, handlers: Sequence[logging.Handler]) -> None:
        self.queue = LogQueue()
        self._handlers = list(handlers)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kdb-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WRITE_EVERY_SECONDS):
            self._write_out()
        self._write_out()

    def _write_out(self) -> None:
        items = self.queue.items
        while items:
            batch = [items.popleft() for _ in range(min(len(items), BATCH))]
            records = [
                item if isinstance(item, logging.LogRecord) else item.record() for item in batch
            ]
            for handler in self._handlers:
                _write_batch(handler, [r for r in records if r.levelno >= handler.level])

    def stop(self) -> None:
        """Write out what is queued, then end the thread."""
        self._stop.set()
        self._thread.join()
        self._write_out()  # what a thread queued while the writer ended


def _write_batch(handler: logging.Handler, records: list[logging.LogRecord]) -> None:
    """The records through `handler`, as `handler.handle` would write them one by one; a
    stream handler's in one write and one flush."""
    if type(handler).emit is not logging.StreamHandler.emit:
        for record in records:
            handler.handle(record)
        return
    assert isinstance(handler, logging.StreamHandler)
    with handler.lock:  # type: ignore[union-attr]  # Handler.createLock made it
        lines: list[str] = []
        filtered = bool(handler.filters)  # most handlers have none: no call per line then
        for record in records:
            if filtered and not handler.filter(record):
                continue
            try:
                lines.append(handler.format(record) + handler.terminator)
            except Exception:  # noqa: BLE001 - what StreamHandler.emit does with a bad one
                handler.handleError(record)
        if not lines:
            return
        try:
            handler.stream.write("".join(lines))
            handler.flush()
        except Exception:  # noqa: BLE001 - a broken stream, as StreamHandler.emit has it
            handler.handleError(records[-1])


@contextlib.contextmanager
def queued_log() -> Iterator[LogQueue | None]:
    """While inside, the root logger's records are written by one writer thread; yields
    its queue (None when the root logger has no handlers: nothing is written then)."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    if not handlers:
        yield None
        return
    writer = _Writer(handlers)
    root.handlers = [_Queued(writer.queue)]
    try:
        yield writer.queue
    finally:
        root.handlers = handlers
        writer.stop()
