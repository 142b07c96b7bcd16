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

The writer sleeps while nothing is queued, and the record that finds it asleep wakes it. It
then gathers what comes meanwhile for GATHER_SECONDS, or until its last round is
WRITE_EVERY_SECONDS old if that is later, and writes: two wake-ups a round, however many
lines it holds. A wake-up is what the writer costs: 25 to 120 us of CPU each on a shared
machine, where formatting and writing a line is 10. Waking on a 20 ms clock whatever came
cost 0.35 ms per 100 ms on an idle server. Writing at once when woken cost a commit that
answered 10 long polls three wake-ups (its INSERT's line, then the 10 answers' lines a
millisecond later, then the gathering of the rest): the short gathering takes a commit's
lines in one round.

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

from refimpl.log_format import TextLineFormatter

# The writer's rounds are at least this far apart: how long a line may wait to be written.
# Not a round per record on a busy server (a blocking queue's wake-up per record cost a
# fifth of a point SELECT's time).
WRITE_EVERY_SECONDS = 0.02
# How long a round gathers at least once a record woke the writer: the lines of one commit's
# answers (made within a millisecond or two of each other) go in one round.
GATHER_SECONDS = 0.005
# Records waiting to be written. A stderr that stops taking lines holds the loggers up once
# this many wait, as it would without the queue, instead of growing memory without bound.
MAX_QUEUED = 10_000
# Records a round writes at most: a round's batch is held in memory, formatted.
BATCH = 1_000


class LineLater(Protocol):
    """A line queued as plain fields: the writer makes its record, or for a text handler
    its text alone (`text_line`: None when the formatter needs the record)."""

    def record(self) -> logging.LogRecord: ...

    def text_line(self, formatter: TextLineFormatter) -> str | None: ...


class LogQueue:
    """The queue of records and lines waiting for the writer, oldest first."""

    def __init__(self) -> None:
        self.items: collections.deque[logging.LogRecord | LineLater] = collections.deque()
        # The writer's: True from just before it looks at an empty queue to just after it
        # is woken. A record appended while it is True sets `wake`.
        self.asleep = False
        self.wake = threading.Event()

    def put(self, item: logging.LogRecord | LineLater) -> None:
        # No lock and no formatting here: a deque's append is safe between threads, and
        # the arguments of our lines are strings and numbers, which cannot change before
        # the writer formats them.
        while len(self.items) >= MAX_QUEUED:
            time.sleep(WRITE_EVERY_SECONDS)
        self.items.append(item)
        # Appended first, looked at second: the writer marks itself asleep first and looks
        # at the queue second, so either it sees this record or this sees it asleep. A
        # wake-up it did not need (it was already awake) costs it one empty round. The first
        # record to see it asleep takes the flag down before it wakes it, so the other
        # threads queueing lines until the writer runs do not wake it again: each wake-up
        # is a lock, a notify and a futex call, and 16 busy workers made one a line.
        if self.asleep:
            self.asleep = False
            self.wake.set()


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
                queue.wake.wait()  # no clock: a record or the stop wakes it
            queue.asleep = False
            queue.wake.clear()
            if self._stop:
                break
            # The round gathers the records made meanwhile.
            time.sleep(max(GATHER_SECONDS, last_round + WRITE_EVERY_SECONDS - time.monotonic()))
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
        self.queue.wake.set()
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
