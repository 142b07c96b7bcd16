"""The JSON objects and SSE bytes of change-stream answers (`GET /api/changes`).

`ChangeObjects` makes one change's object in C (msgspec structs, no dict per row); a table
without before-images and a feed without options get exactly `ChangeEvent`, the others
`OptionChangeEvent`, whose UNSET fields are not written (spec: changes, changefeeds). Such a
plain feed's page is read as runs of the log (`ChangeRun`) and its objects are made a run at
a time (`ChangeObjects.of_runs`): no Python step per row, but to format a TIMESTAMP value.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any

import msgspec

from refimpl.engine.features.change_stream import (
    CHUNK_ROWS,
    UNLOGGED,
    Change,
    ChangeBatch,
    ChangeRun,
    RunBatch,
    RunPieces,
    chunks,
)
from refimpl.engine.features.feed_options import ShapedBatch
from refimpl.engine.features.initial_copy import INITIAL, CopiedRows
from refimpl.engine.query.deadlines import make_way
from refimpl.engine.storage import values
from refimpl.http.encode import encode_json

RETRY_MS = 1000
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
JSON_HEADERS = {"Cache-Control": "no-store"}


# gc=False: these objects live for one answer and hold only values and rows, never a cycle;
# left out of the collector, a page of them does not set off a collection on the way.
class ChangeEvent(msgspec.Struct, gc=False):
    """One change as the JSON object of the stream, in the order of its fields."""

    lsn: int
    seq: int
    committed_at: str
    op: str
    key: str | None
    row: object


class OptionChangeEvent(msgspec.Struct, gc=False):
    """A change of a table with before-images (`old_row` beside `row`) or of a feed with
    options (`type`); a field left UNSET is not written (spec: changefeeds)."""

    lsn: int
    seq: int
    committed_at: str | None
    op: str
    key: str | None
    row: object
    old_row: object = msgspec.UNSET
    type: str | msgspec.UnsetType = msgspec.UNSET


def state(name: str, typed: bool) -> dict[str, str]:
    """A state entry (`initializing`, `ready`), with its type when types are asked for."""
    return {"state": name, "type": "state"} if typed else {"state": name}


@functools.lru_cache(maxsize=256)
def _row_type(names: tuple[str, ...]) -> Callable[..., object]:
    """What makes, of a row's values, an object that encodes as `{name: value, ...}` for
    these column names: a struct, made in C with no dict per row, its fields named f0, f1,
    ... and renamed to the columns. msgspec renames no field to a name holding a quote, a
    backslash or a control character, which a quoted column name may: such a table's rows
    are dicts, slower to make, written the same."""
    fields = [f"f{index}" for index in range(len(names))]
    try:
        return msgspec.defstruct(
            "Row", fields, rename=dict(zip(fields, names, strict=True)), gc=False
        )
    except ValueError:
        return functools.partial(_row_dict, names)


def _row_dict(names: tuple[str, ...], *cells: object) -> dict[str, object]:
    return dict(zip(names, cells, strict=True))


class ChangeObjects:
    """Makes the JSON object of each change of one table's stream (`row` only for an upsert).

    Built once per answer: it knows which columns need converting (timestamps to text, as
    `values.to_json` does; a non-finite double is written as null by the encoder itself) and
    leaves the others as they are, and it formats a transaction's `committed_at` once for all
    its rows.
    """

    def __init__(self, names: tuple[str, ...], types: dict[str, str]) -> None:
        self._width = len(names)
        self._row = _row_type(names)
        self._timestamps = [i for i, name in enumerate(names) if types[name] == "TIMESTAMP"]
        self._converts = bool(self._timestamps)
        self._lsn = -1
        self._committed_at = ""

    def of_runs(self, runs: Iterable[ChangeRun]) -> list[ChangeEvent]:
        """The objects of a plain feed's runs, in order: made by C-level maps over each run,
        a chunk at a time (the same objects `__call__` makes of its changes)."""
        events: list[ChangeEvent] = []
        made = 0  # objects made since the last step: a step is CHUNK_ROWS of them
        for run in runs:
            committed_at = self._formatted(run.lsn, run.committed_at)
            seq = run.seq
            for items in chunks(run.items):
                if made >= CHUNK_ROWS:
                    make_way()  # between steps, not before the first (see `_stepping`)
                    made = 0
                made += len(items)
                head = (repeat(run.lsn), itertools.count(seq), repeat(committed_at), repeat(run.op))
                if run.op == "upsert":
                    events += map(ChangeEvent, *head, repeat(None), self._rows(items))
                else:
                    events += map(ChangeEvent, *head, items, repeat(None))
                seq += len(items)
        return events

    def of_copied(self, copied: CopiedRows, typed: bool) -> list[OptionChangeEvent]:
        """The objects of an initial copy's rows (`with_options` of each as an initial
        change), made by C-level maps a chunk at a time; `typed`: of type `initial`."""
        events: list[OptionChangeEvent] = []
        old_row = repeat(None if copied.full else msgspec.UNSET)
        kind = repeat(INITIAL if typed else msgspec.UNSET)
        seq = 0
        for rows, keys in zip(chunks(copied.rows), chunks(copied.keys), strict=True):
            make_way()
            events += map(
                OptionChangeEvent,
                repeat(copied.lsn),
                itertools.count(seq),
                repeat(None),
                repeat(INITIAL),
                keys,
                self._rows(rows),
                old_row,
                kind,
            )
            seq += len(rows)
        return events

    def _rows(self, rows: Sequence[Sequence[Any]]) -> Iterator[object]:
        """The row objects of these rows' cells (timestamps converted)."""
        if self._converts:
            rows = [self._converted(row) for row in rows]
        return itertools.starmap(self._row, rows)

    def _formatted(self, lsn: int, committed_at: int) -> str:
        """A transaction's `committed_at` as text, formatted once for all its changes."""
        if lsn != self._lsn:
            self._lsn, self._committed_at = lsn, values.format_timestamp(committed_at)
        return self._committed_at

    def __call__(self, change: Change) -> ChangeEvent:
        lsn, committed_at = change.lsn, change.committed_at
        assert committed_at is not None  # a change of the log, not a row of a copy
        row = self._made(change.row) if change.op == "upsert" else None
        shown_at = self._formatted(lsn, committed_at)
        return ChangeEvent(lsn, change.seq, shown_at, change.op, change.key, row)

    def with_options(self, change: Change, full: bool, kind: str | None) -> OptionChangeEvent:
        """The object of a change with `old_row` (`full`: the table keeps before-images)
        and `type` (`kind`) when given."""
        lsn, op, cells = change.lsn, change.op, change.row
        committed_at = None  # a row of an initial copy: no commit of its own
        if change.committed_at is not None:
            committed_at = self._formatted(lsn, change.committed_at)
        row = None
        # A point feed's missing row is an initial change whose cells are all NULL.
        if op == "upsert" or (op == INITIAL and cells.count(None) != self._width):
            row = self._made(cells)
        event = OptionChangeEvent(lsn, change.seq, committed_at, op, change.key, row)
        if full:
            old = change.old
            event.old_row = None if old is None or old is UNLOGGED else self._made(old)
        if kind is not None:
            event.type = kind
        return event

    def _made(self, cells: Sequence[Any]) -> object:
        return self._row(*(self._converted(cells) if self._converts else cells))

    def _converted(self, cells: Sequence[Any]) -> list[Any]:
        """The cells with each TIMESTAMP value as its text."""
        made = list(cells)
        for at in self._timestamps:
            if (value := made[at]) is not None:
                made[at] = values.format_timestamp(value)
        return made


@dataclass(frozen=True, slots=True)
class Shaping:
    """What an answer shows beyond the plain stream: `old_row` (a table with before-images),
    each change's `type`, and a `ready` state first."""

    full: bool = False
    types: list[str] | None = None
    ready: bool = False

    def objects(self, names: tuple[str, ...], types: dict[str, str]) -> Callable[..., Any]:
        """The maker of the answer's objects, called with a change and its index."""
        objects = ChangeObjects(names, types)
        if not self.full and self.types is None:
            return lambda change, _index: objects(change)
        kinds = self.types
        return lambda change, index: objects.with_options(
            change, self.full, None if kinds is None else kinds[index]
        )

    def state(self) -> dict[str, str]:
        return state("ready", self.types is not None)


PLAIN = Shaping()


class _JsonAnswer(msgspec.Struct, gc=False):
    """The JSON answer's fields, in their order: a struct encodes faster than a dict."""

    table: str
    changes: Any  # the change objects, or a `msgspec.Raw` array of them (a big page)
    next: int
    more: bool
    durable_lsn: int
    oldest_lsn: int


_encoder = msgspec.json.Encoder()
_encode = _encoder.encode
_encode_into = _encoder.encode_into
_OPEN, _COMMA = ord("["), ord(",")
# Stands for a big page's changes in its answer's encoding, which they are spliced into.
_SPLICED = msgspec.Raw(b"0")
_SPLICED_AT = b'"changes":0'
_CHANGE = b"event: change\ndata: "
_NEXT_CHANGE = b"\n\n" + _CHANGE
_lines = msgspec.json.Encoder().encode_lines

# A page of the stream; runs for a plain feed, read as it is encoded (RunPieces) or whole.
Page = ChangeBatch | ShapedBatch | RunBatch | RunPieces
Pieces = Iterator[tuple[list[Any], Iterable[tuple[int, int]]]]  # see `_pieces`


def _stepping(steps: Iterator[Sequence[Any]]) -> Iterator[Sequence[Any]]:
    """`steps`, with `make_way` between two of them, never before the first: a small page,
    one step, never pauses. A worker's turn is timed by the wall clock from its first
    step of recent work, and the requests a worker answers one after the other are such
    work; a pause before each small page's one step made a quick reader of small pages
    pause at almost every page."""
    for index, step in enumerate(steps):
        if index:
            make_way()
        yield step


def json_lines(objects: Sequence[Any]) -> list[bytes]:
    """The JSON text of each object, made a call a chunk (JSON text holds no raw newline)."""
    lines: list[bytes] = []
    for chunk in _stepping(chunks(objects)):
        try:
            lines += _lines(chunk).split(b"\n")[:-1]
        except (OverflowError, TypeError):  # what only encode_json's fallback encodes
            lines += map(encode_json, chunk)
    return lines


def _text_lines(objects: Sequence[Any]) -> bytes:
    """The JSON text of each object, each ending in a line break, in one bytes object."""
    try:
        return _lines(objects)
    except (OverflowError, TypeError):  # what only encode_json's fallback encodes
        return b"".join(encode_json(item) + b"\n" for item in objects)


def _array_parts(objects: Sequence[Any]) -> list[bytes | memoryview]:
    """The objects as the parts of one JSON array, encoded a chunk at a time (see
    CHUNK_ROWS): each chunk's text without its brackets, as a view (no copy of it)."""
    parts: list[bytes | memoryview] = [b"["]
    for chunk in _stepping(chunks(objects)):
        if len(parts) > 1:
            parts.append(b",")
        parts.append(memoryview(encode_json(chunk))[1:-1])
    parts.append(b"]")
    return parts


def json_array(objects: Sequence[Any]) -> msgspec.Raw:
    """The objects as one JSON array, encoded a chunk at a time (see CHUNK_ROWS), to be
    put in an answer as it is (the answer's other fields are plain, never the fallback's)."""
    return msgspec.Raw(b"".join(_array_parts(objects)))


def _pieces(batch: Page, names: tuple[str, ...], types: dict[str, str], shaping: Shaping) -> Pieces:
    """The objects of the page's changes and (LSN, how many changes) of their parts, in
    order, a piece of whole transactions at a time: a page read as it is used (RunPieces)
    piece by piece, each piece's objects made when it is asked for, any other page whole.
    The sizes are made only if read (`_transactions` sums them by transaction)."""
    if isinstance(batch, ChangeBatch | ShapedBatch):
        made = shaping.objects(names, types)
        changes = batch.changes
        sized: Iterable[tuple[int, int]] = ((change.lsn, 1) for change in changes)
        yield [made(change, index) for index, change in enumerate(changes)], sized
        return
    objects = ChangeObjects(names, types)
    for runs in [batch.runs] if isinstance(batch, RunBatch) else batch:
        yield objects.of_runs(runs), ((run.lsn, len(run.items)) for run in runs)


def _events(
    batch: Page, names: tuple[str, ...], types: dict[str, str], shaping: Shaping
) -> list[Any]:
    """The objects of the page's changes, in order."""
    return [event for events, _ in _pieces(batch, names, types, shaping) for event in events]


def _transactions(sized: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """(LSN, how many changes) of each transaction, of (LSN, changes) of its parts."""
    return [
        (lsn, sum(count for _, count in group))
        for lsn, group in itertools.groupby(sized, key=itemgetter(0))
    ]


def encode_sse(
    batch: Page, names: tuple[str, ...], types: dict[str, str], shaping: Shaping = PLAIN
) -> bytes:
    """Events: `state` first when asked, `change` per row (`id` on a transaction's last
    row), then `position`."""
    parts: list[bytes | memoryview] = [b"retry: %d\n\n" % RETRY_MS]
    if shaping.ready:
        parts.append(b"event: state\ndata: " + encode_json(shaping.state()) + b"\n\n")
    made = 0  # objects encoded since the last step (see `_stepping`)
    for events, sized in _pieces(batch, names, types, shaping):
        at = 0
        for lsn, count in _transactions(sized):
            if not count:
                continue
            end = at + count
            for start in range(at, end, CHUNK_ROWS):
                if made >= CHUNK_ROWS:
                    make_way()
                    made = 0
                step = events[start : min(start + CHUNK_ROWS, end)]
                made += len(step)
                # The step's lines as one text, each line break made an event's end and the
                # next one's start by one C call: no bytes object per row (JSON text holds
                # no raw line break). The start after the last line is cut by a view.
                framed = _text_lines(step).replace(b"\n", _NEXT_CHANGE)
                events_text = memoryview(framed)[: -len(_CHANGE)]
                if start + CHUNK_ROWS < end:  # not the transaction's last step: no id in it
                    parts += (_CHANGE, events_text)
                    continue
                # The transaction's last event carries its id: where that event starts (-1:
                # it is the step's only one, after the leading `_CHANGE`).
                last = framed.rfind(_CHANGE, 0, len(events_text))
                if last < 0:
                    parts += (b"id: %d\n" % lsn, _CHANGE, events_text)
                else:
                    parts += (_CHANGE, events_text[:last], b"id: %d\n" % lsn, events_text[last:])
            at = end
    position = encode_json({"next": batch.next_lsn, "more": batch.more})
    parts.append(b"id: %d\nevent: position\ndata: %s\n\n" % (batch.next_lsn, position))
    return b"".join(parts)


def encode_json_answer(
    table: str,
    batch: Page,
    names: tuple[str, ...],
    types: dict[str, str],
    durable: int | Callable[[int], int],
    oldest: int,
    shaping: Shaping = PLAIN,
) -> bytes | bytearray:
    """The JSON answer of `GET /api/changes` (spec: changes): its fields in this order.
    `durable` is its `durable_lsn`, or what makes it of the page's `next` (which a page
    read as it is used knows only once it was)."""
    pieces = _pieces(batch, names, types, shaping)
    # The first piece's objects, kept until a second comes: a page of one small piece (the
    # page is one step anyway) is encoded whole with the answer by one C call.
    first: list[Any] = [shaping.state()] if shaping.ready else []
    first += next(pieces, ([], []))[0]
    # A big page is written into one buffer as it is encoded: the answer's fields before
    # `changes` (`table` only), then the array, a step at a time, then the fields after it
    # (known once the page was read). No step's text is made apart and copied, and no join
    # copies the page: each byte is written once, into pages of memory faulted in once.
    body = bytearray()

    def encoded(objects: list[Any]) -> None:
        for chunk in chunks(objects):
            if body:
                make_way()  # between steps, never before the first (see `_stepping`)
            else:
                begin()
            _extend_array(body, chunk)

    def begin() -> None:
        body.extend(_frame(table, 0, False, 0, 0)[0])
        body.extend(b"[]")

    for events, _ in pieces:
        if first:
            encoded(first)
            first = []
        encoded(events)  # and lets the piece's objects go
    next_lsn, more = batch.next_lsn, batch.more
    durable_lsn = durable(next_lsn) if callable(durable) else durable
    if not body and len(first) <= CHUNK_ROWS:
        try:
            return _encode(_JsonAnswer(table, first, next_lsn, more, durable_lsn, oldest))
        except (OverflowError, TypeError):  # what only encode_json's fallback encodes
            pass
    encoded(first)
    if not body:
        begin()  # no change at all, and the one call above refused the rest of the answer
    body.extend(_frame(table, next_lsn, more, durable_lsn, oldest)[1])
    return body


def _frame(table: str, next_lsn: int, more: bool, durable: int, oldest: int) -> tuple[bytes, bytes]:
    """The JSON answer's text before its `changes` array and after it. The array's place is
    found by its field name: inside the table's name, a JSON string, every quote is
    escaped, so `"changes":` there is never preceded by its unescaped quote. What comes
    before it is the same for any `next_lsn`, `more`, `durable` and `oldest`."""
    frame = _encode(_JsonAnswer(table, _SPLICED, next_lsn, more, durable, oldest))
    at = frame.index(_SPLICED_AT) + len(_SPLICED_AT) - 1
    return frame[:at], frame[at + 1 :]


def _extend_array(buffer: bytearray, objects: Sequence[Any]) -> None:
    """`objects` (one or more) added to the JSON array that ends `buffer` (its closing `]`
    the buffer's last byte), encoded into the buffer itself."""
    empty = buffer[-2] == _OPEN  # `[]`: no item yet
    at = len(buffer) - (2 if empty else 1)
    try:
        _encode_into(objects, buffer, at)  # `[a,b]` from `at`: over `[]`, or over `]`
    except (OverflowError, TypeError):  # what only encode_json's fallback encodes
        del buffer[at:]
        buffer.extend(encode_json(list(objects)))
    if not empty:
        buffer[at] = _COMMA  # the `[` written over the array's `]` parts its items
