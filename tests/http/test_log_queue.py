"""While a server runs, log records are written by one writer thread: all, in order, once."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.http.request_log import LineShapes, RequestLine
from refimpl.http.serving.log_queue import LogQueue, queued_log
from refimpl.log_format import TextLineFormatter
from tests.hypothesis_settings import OVER_FIXTURE


@pytest.fixture()
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(threadName)s %(message)s"))
    root.handlers, root.level = [handler], logging.INFO
    try:
        yield out
    finally:
        root.handlers, root.level = saved_handlers, saved_level


# The fixture's stream is emptied at the start of each example.
@settings(OVER_FIXTURE, max_examples=25)
@given(st.lists(st.lists(st.text(alphabet="abcxyz", max_size=8), max_size=30), max_size=4))
def test_every_line_is_written_once_in_each_threads_order(
    stream: io.StringIO, lines: list[list[str]]
) -> None:
    stream.seek(0)
    stream.truncate()
    log = logging.getLogger("refimpl.test")
    root = logging.getLogger()
    before = list(root.handlers)

    def write(number: int) -> None:
        for index, text in enumerate(lines[number]):
            log.info("%d %d %s", number, index, text)

    with queued_log():
        assert root.handlers != before  # records go to the queue now
        threads = [
            threading.Thread(target=write, args=(n,), name=f"t{n}") for n in range(len(lines))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert root.handlers == before  # the handlers are back at the end
    written: dict[int, list[str]] = {n: [] for n in range(len(lines))}
    for line in stream.getvalue().splitlines():
        thread_name, number, index, *text = line.split(" ")
        assert thread_name == f"t{number}"  # the record keeps the thread that made it
        assert int(index) == len(written[int(number)])  # each thread's lines in its order
        written[int(number)].append(" ".join(text))
    assert written == dict(enumerate(lines))


def test_a_line_after_the_end_is_written_at_once(stream: io.StringIO) -> None:
    with queued_log():
        logging.getLogger("refimpl.test").warning("inside")
    logging.getLogger("refimpl.test").warning("after")
    assert stream.getvalue().splitlines() == ["MainThread inside", "MainThread after"]


def test_without_handlers_nothing_changes() -> None:
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers = []
    try:
        with queued_log():
            assert root.handlers == []
    finally:
        root.handlers = saved


class _Line:
    """A line queued as plain fields, made into its record by the writer."""

    def __init__(self, text: str) -> None:
        self.text = text

    def text_line(self, formatter: TextLineFormatter) -> str | None:
        return None  # the record, always

    def record(self) -> logging.LogRecord:
        return logging.makeLogRecord(
            {"msg": self.text, "levelno": logging.INFO, "levelname": "INFO", "threadName": "later"}
        )


def test_lines_queued_as_fields_keep_their_place_among_records(stream: io.StringIO) -> None:
    log = logging.getLogger("refimpl.test")
    with queued_log() as queue:
        assert queue is not None
        for n in range(2500):  # more than one round's batch
            if n % 3:
                queue.put(_Line(f"line {n}"))
            else:
                log.info("record %d", n)
    written = [line.split(" ", 1)[1] for line in stream.getvalue().splitlines()]
    assert written == [f"{'record' if n % 3 == 0 else 'line'} {n}" for n in range(2500)]


def test_a_handler_that_is_not_a_stream_gets_each_record(stream: io.StringIO) -> None:
    seen: list[str] = []

    class Collecting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root = logging.getLogger()
    root.handlers.append(Collecting(level=logging.WARNING))
    with queued_log():
        logging.getLogger("refimpl.test").info("only the stream")
        logging.getLogger("refimpl.test").warning("both")
    assert seen == ["both"]
    assert stream.getvalue().splitlines() == ["MainThread only the stream", "MainThread both"]


def _switches_of(thread: threading.Thread) -> int:
    """How many times the system ran the thread so far (its schedstat's time slices)."""
    return int(Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()[2])


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_the_writer_sleeps_while_nothing_is_queued_and_a_line_wakes_it(
    stream: io.StringIO,
) -> None:
    with queued_log():
        writer = next(t for t in threading.enumerate() if t.name == "kdb-log")
        # Until it has started and gone to sleep: a busy machine may take long for that.
        before, deadline = _switches_of(writer), time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = _switches_of(writer)
            if now == before:
                break
            before = now
        time.sleep(0.3)  # a writer on a 20 ms clock would have run 15 times
        assert _switches_of(writer) == before
        logging.getLogger("refimpl.test").warning("wakes it")
        deadline = time.monotonic() + 30
        while not stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        # Written while the server runs, not only at its end.
        assert stream.getvalue().splitlines() == ["MainThread wakes it"]
        assert _switches_of(writer) > before


def test_only_the_first_line_queued_while_the_writer_sleeps_wakes_it() -> None:
    queue = LogQueue()
    record = logging.makeLogRecord({"msg": "a line"})
    queue.asleep = True  # as the writer marks itself before it waits on an empty queue
    queue.put(record)
    assert queue.wake.is_set() and not queue.asleep
    queue.wake.clear()  # the writer, woken: the lines queued until it runs wake it no more
    for _ in range(10):
        queue.put(record)
    assert not queue.wake.is_set()
    assert len(queue.items) == 11


_shown = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    method=_shown,
    path=_shown,
    query=st.one_of(_shown, st.just("token=kdb_" + "a" * 30 + "&x=1")),
    status=st.integers(100, 599),
    seconds=st.floats(0, 1e4),
    request_id=_shown,
    created=st.floats(0, 4e9),
)
def test_a_request_line_as_text_is_its_records_text_line(
    method: str,
    path: str,
    query: str,
    status: int,
    seconds: float,
    request_id: str,
    created: float,
) -> None:
    # What the writer writes of a request's line to a text handler, made without its record.
    line = RequestLine(created, method, path, query, "/exec", status, seconds, request_id, "c")
    formatter = TextLineFormatter()
    assert line.text_line(formatter) == formatter.format(line.record())
    other = TextLineFormatter()
    other.datefmt = "%H:%M"
    assert line.text_line(other) is None  # not the default time format: the record's way


# Pieces of a long poll's query string: plain ones, escaped ones, secrets, control
# characters, and ids (a name, a dot and digits; or digits).
_piece = st.one_of(
    st.sampled_from(
        [
            "query=SELECT%20*%20FROM%20t%20WHERE%20s%20%3D%20%27a%27",
            "query=SELECT+1",
            "wait=30000",
            "token=kdb_" + "a" * 30,
            "q=DROP%20TOKEN%20%27kdb_" + "b" * 25 + "%27",
            "x=%0A",
            "id=",
            "id=a_b.1",
            "id=%41.2",
            "",
        ]
    ),
    st.builds(
        lambda n, d: f"id={n}{d}",
        st.sampled_from(["", "abc.", "kdbtoken.", "TOKEN."]),
        st.text("0123456789", min_size=1, max_size=20),
    ),
    st.text(st.characters(codec="utf-8"), max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_piece, min_size=1, max_size=5),
    digits=st.lists(st.text("0123456789", min_size=1, max_size=20), min_size=1, max_size=4),
    method=st.sampled_from(["GET", "G\nET"]),
    path=st.sampled_from(["/api/subscribe", "/a\x85b", "/kdb_" + "c" * 25]),
)
def test_a_long_polls_lines_made_from_their_shape_are_their_records_lines(
    pieces: list[str], digits: list[str], method: str, path: str
) -> None:
    # A long poll's requests differ in the digits of their id= alone: each line after the
    # first is made from the shape of the first, with its digits put in, and is its
    # record's line all the same (also a query the shape is not for, or too long for it).
    shapes = LineShapes()
    formatter = TextLineFormatter()
    query = "&".join(pieces)
    for n, each in enumerate(digits):
        asked = "&".join([*pieces, f"id=s1.{each}"]) if n % 2 else f"{query}&id={each}"
        for text in (asked, query, asked * 20):
            line = RequestLine(1.7e9 + n, method, path, text, "/r", 200, n / 7, "r1", "c", shapes)
            assert line.text_line(formatter) == formatter.format(line.record())


def test_request_lines_to_a_text_handler_are_written_as_their_records_would_be() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextLineFormatter())
    root.handlers, root.level = [handler], logging.INFO
    lines = [
        RequestLine(1.7e9 + n / 7, "POST", "/exec\n", "a=%0A", "/exec", 200, n / 1e4, "r", "c")
        for n in range(30)
    ]
    try:
        with queued_log() as queue:
            assert queue is not None
            for n, line in enumerate(lines):
                queue.put(line)
                if n % 10 == 0:
                    logging.getLogger("refimpl.test").info("record %d", n)
    finally:
        root.handlers, root.level = saved_handlers, saved_level
    written = [line for line in out.getvalue().splitlines() if "record" not in line]
    assert written == [TextLineFormatter().format(line.record()) for line in lines]
