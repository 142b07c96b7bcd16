"""Log lines written by one thread while a server runs: a request's thread only queues them.

Every answered request has a log line (`refimpl.http.request_log`). Written by the thread
that answers, it costs that thread the handler's lock and a write to stderr while it holds
one of the few admission places (`refimpl.engine.admission`): under 16 clients a third of
the places' time went to waiting for the lock and the write, time in which nobody else was
answered. `queued_log()` puts the root logger's handlers behind a queue for as long as the
server runs: a record is queued as it is made, and one writer thread formats and writes the
queued records in rounds, at most one every WRITE_EVERY_SECONDS, in the order they were made.
At the end the queue is written out and the handlers go back, so no line is lost and lines
logged afterwards are written at once again.

The writer sleeps while nothing is queued, and is woken once a batch of lines is queued. A
wake-up is what the writer costs (25 to 120 us of CPU each on a shared machine, where
formatting and writing a line is 10, and more in the interpreter lock's hand-overs it causes),
so lines come in batches: a thread about to queue lines that others' follow closely (a
round of woken long polls answered on the room's thread, a write's acknowledgement on the
thread that publishes its flush) opens a batch (`LogQueue.batch`), and its lines wake nobody
until it ends it (`LogQueue.end_batch`). A `GATHERING` batch is waited for by the others too:
the end of a batch wakes the writer only when no gathering batch of another thread is open
meanwhile, or when the oldest line has waited WRITE_EVERY_SECONDS already. A commit that
answered 10 long polls thus wakes the writer once, after the round (its acknowledgement's
batch ends within it, or just before), where waking at its first line and gathering for
5 ms cost two wake-ups, and its voluntary switches a commit went from 4.1-4.3 to 1.9-2.1 (the
interpreter lock's hand-overs to it among them). A line queued outside a batch (a worker's
request, a warning, a stream's end) wakes the writer at once. A round follows the last by at least
WRITE_EVERY_SECONDS, whatever wakes the writer, so a busy server's lines go in a round every
WRITE_EVERY_SECONDS, not one a batch.

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
from queue import SimpleQueue
from threading import get_ident
from typing import Protocol

from refimpl.log_format import TextLineFormatter

# The writer's rounds are at least this far apart: how long a line may wait to be written
# once its batch ended. Not a round per batch on a busy server (a blocking queue's wake-up
# per record cost a fifth of a point SELECT's time).
WRITE_EVERY_SECONDS = 0.02
# Records waiting to be written. A stderr that stops taking lines holds the loggers up once
# this many wait, as it would without the queue, instead of growing memory without bound.
MAX_QUEUED = 10_000
# Records a round writes at most: a round's batch is held in memory, formatted.
BATCH = 1_000
# `LogQueue.batch`'s `gathering`: the other threads' batches wait for this one's end.
GATHERING = True


class LineLater(Protocol):
    """A line queued as plain fields: the writer makes its record, or for a text handler
    its text alone (`text_line`: None when the formatter needs the record)."""

    def record(self) -> logging.LogRecord: ...

    def text_line(self, formatter: TextLineFormatter) -> str | None: ...


class LogQueue:
    """The queue of records and lines waiting for the writer, oldest first, and the batches
    of lines the threads are queueing (`batch`)."""

    def __init__(self) -> None:
        self.items: collections.deque[logging.LogRecord | LineLater] = collections.deque()
        # The writer's: True from just before it looks at an empty queue to just after it
        # is woken. A line queued while it is True wakes it, or leaves that to its batch.
        self.asleep = False
        # A token wakes the writer: put and taken in C, one futex call each (an Event's
        # Condition is some hundred opcodes and a second lock for the woken thread).
        self.wake: SimpleQueue[None] = SimpleQueue()
        # Threads queueing a batch (by `threading.get_ident`), and those among them whose
        # batch the others wait for (`GATHERING`).
        self._batching: set[int] = set()
        self._gathering: set[int] = set()
        # When the first line of a batch found the writer asleep (0.0: none waits so).
        self._since = 0.0

    def put(self, item: logging.LogRecord | LineLater) -> None:
        # No lock and no formatting here: a deque's append is safe between threads, and
        # the arguments of our lines are strings and numbers, which cannot change before
        # the writer formats them.
        while len(self.items) >= MAX_QUEUED:
            time.sleep(WRITE_EVERY_SECONDS)
        self.items.append(item)
        # Appended first, looked at second: the writer marks itself asleep first and looks
        # at the queue second, so either it sees this record or this sees it asleep.
        if self.asleep:
            if get_ident() in self._batching:
                if not self._since:
                    self._since = time.monotonic()
                return  # the batch's end wakes it
            self.wake_writer()

    def wake_writer(self) -> None:
        """Wake the writer if it sleeps. The first thread to see it asleep takes the flag
        down before it wakes it, so the others queueing lines until it runs do not wake it
        again (two that both saw it leave it one empty round)."""
        if self.asleep:
            self.asleep = False
            self.wake.put(None)

    def batch(self, gathering: bool = False) -> bool:
        """The calling thread's lines, from now until its `end_batch`, wake the writer only
        at that end; `gathering`: so do the other threads' lines meanwhile (unless they
        waited WRITE_EVERY_SECONDS). False, and nothing changes, when the thread is in a
        batch already: the caller then must not end it (its opener does)."""
        ident = get_ident()
        if ident in self._batching:
            return False
        self._batching.add(ident)
        if gathering:
            self._gathering.add(ident)
        return True

    def end_batch(self) -> None:
        """End the calling thread's batch: wake the writer for the lines that wait, unless
        a gathering batch of another thread is still open (its end wakes it) and the oldest
        of them has waited less than WRITE_EVERY_SECONDS."""
        ident = get_ident()
        self._batching.discard(ident)
        self._gathering.discard(ident)
        # Taken out first, looked second: of two batches that end at once, the last sees
        # no other open.
        if self.asleep and self.items:
            if not self._gathering or time.monotonic() - self._since >= WRITE_EVERY_SECONDS:
                self.wake_writer()

    def woken(self) -> None:
        """The writer's, once woken: the lines that waited are its now."""
        self.asleep = False
        self._since = 0.0


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
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="kdb-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        queue = self.queue
        last_round = -WRITE_EVERY_SECONDS
        while not self._stop:
            queue.asleep = True
            if not queue.items:
                queue.wake.get()  # no clock: a line, a batch's end or the stop wakes it
            queue.woken()
            if self._stop:
                break
            # Rounds WRITE_EVERY_SECONDS apart at least: what comes meanwhile joins this one.
            wait = last_round + WRITE_EVERY_SECONDS - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            last_round = time.monotonic()
            self._write_out()
        self._write_out()

    def _write_out(self) -> None:
        items = self.queue.items
        while items:
            batch = [items.popleft() for _ in range(min(len(items), BATCH))]
            for handler in self._handlers:
                _write_batch(handler, batch)

    def stop(self) -> None:
        """Write out what is queued, then end the thread."""
        self._stop = True
        self.queue.wake.put(None)
        self._thread.join()
        self._write_out()  # what a thread queued while the writer ended


def _write_batch(handler: logging.Handler, batch: list[logging.LogRecord | LineLater]) -> None:
    """The records and lines through `handler`, as `handler.handle` would write them one by
    one (those under its level left out); a stream handler's in one write and one flush, and
    a line to a text formatter as its text, without a record."""
    if type(handler).emit is not logging.StreamHandler.emit:
        for item in batch:
            record = _record_of(item)
            if record.levelno >= handler.level:
                handler.handle(record)
        return
    assert isinstance(handler, logging.StreamHandler)
    formatter = handler.formatter
    filtered = bool(handler.filters)  # most handlers have none: no call per line then
    # A line is INFO: the text alone when nothing but the format looks at its record.
    text_formatter = (
        formatter
        if type(formatter) is TextLineFormatter and not filtered and handler.level <= logging.INFO
        else None
    )
    with handler.lock:  # type: ignore[union-attr]  # Handler.createLock made it
        lines: list[str] = []
        for item in batch:
            if text_formatter is not None and not isinstance(item, logging.LogRecord):
                text = item.text_line(text_formatter)
                if text is not None:
                    lines.append(text + handler.terminator)
                    continue
            record = _record_of(item)
            if record.levelno < handler.level or (filtered and not handler.filter(record)):
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
            handler.handleError(_record_of(batch[-1]))


def _record_of(item: logging.LogRecord | LineLater) -> logging.LogRecord:
    return item if isinstance(item, logging.LogRecord) else item.record()


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
