"""Results as the HTTP API shows them: JSON answers of /exec and CSV of /exp.

Values are converted by `refimpl.engine.storage.values` (one place for their text forms): TIMESTAMP
becomes ISO-8601 text ending in `Z` with milliseconds, microseconds only when there are any
below the millisecond (`2026-10-22T05:43:31.573Z`); a DOUBLE that is not finite is null.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Sequence
from wsgiref.types import StartResponse, WSGIEnvironment

import msgspec
from werkzeug.http import HTTP_STATUS_CODES

from refimpl.engine.result import Column, Result, shown_type
from refimpl.engine.storage import values


def _json_value(kind: str) -> Callable[[object], object] | None:
    """A converter for a column type, None when the Python value is already the JSON one."""
    if kind == "TIMESTAMP" or kind == "DOUBLE":
        return lambda v: values.to_json(v, kind)
    return None


def result_body(result: Result, query: str) -> dict[str, object]:
    """The /exec answer. `query` is the text the client sent, echoed as QuestDB does."""
    body: dict[str, object]
    if result.columns is not None:
        body = {
            "query": query,
            "columns": [{"name": c.name, "type": shown_type(c.type)} for c in result.columns],
            "dataset": convert_rows(result.columns, result.rows),
            "count": result.count,
        }
    else:
        body = {"query": query, "message": result.message or "", "count": result.count}
    if result.statements > 1:
        body["statements"] = result.statements
    return body


def convert_rows(columns: Sequence[Column], rows: Sequence[tuple]) -> list[list[object]]:
    converters = [(i, f) for i, c in enumerate(columns) if (f := _json_value(c.type))]
    if not converters:
        return [list(row) for row in rows]
    out = []
    for row in rows:
        values = list(row)
        for i, convert in converters:
            values[i] = convert(values[i])
        out.append(values)
    return out


def result_answer(result: Result, query: str) -> Answer:
    """The /exec answer as `json_response(result_body(result, query))` makes it, in one
    msgspec call over the result's own rows where it can: msgspec writes a tuple as an array
    and a DOUBLE that is not finite as null, so only TIMESTAMP values are converted first,
    and a column list's JSON part is made once per list (`_shape`)."""
    columns = result.columns
    if result.statements > 1:
        return json_response(result_body(result, query))
    if columns is None:
        # A statement's message (a write's): text and a count, which msgspec always takes.
        message = {"query": query, "message": result.message or "", "count": result.count}
        return Answer(_encoder.encode(message))
    shown, stamps = _shape(columns)
    rows = _with_timestamps(result.rows, stamps) if stamps else result.rows
    body = {"query": query, "columns": shown, "dataset": rows, "count": result.count}
    try:
        return Answer(_encoder.encode(body))
    except (OverflowError, TypeError):
        return json_response(result_body(result, query))  # json's fallback, values converted


# A column list's JSON part and its TIMESTAMP positions, by the list's identity (the list
# is kept with them, so its id is not reused meanwhile): a plan answers with the same list
# at every run. Bounded: emptied when full.
_shapes: dict[int, tuple[list[Column], list[dict[str, str]], tuple[int, ...]]] = {}
SHAPES_KEPT = 256


def _shape(columns: list[Column]) -> tuple[list[dict[str, str]], tuple[int, ...]]:
    kept = _shapes.get(id(columns))
    if kept is not None and kept[0] is columns:
        return kept[1], kept[2]
    shown = [{"name": c.name, "type": shown_type(c.type)} for c in columns]
    stamps = tuple(i for i, c in enumerate(columns) if c.type == "TIMESTAMP")
    if len(_shapes) >= SHAPES_KEPT:
        _shapes.clear()
    _shapes[id(columns)] = (columns, shown, stamps)
    return shown, stamps


def _with_timestamps(rows: Sequence[tuple], stamps: tuple[int, ...]) -> list[list[object]]:
    out = []
    for row in rows:
        values = list(row)
        for i in stamps:
            values[i] = _stamp(values[i])
        out.append(values)
    return out


def _stamp(value: object) -> object:
    return values.to_json(value, "TIMESTAMP")


def csv_chunks(result: Result, rows_per_chunk: int = 1000) -> Iterator[bytes]:
    """RFC 4180 CSV (CRLF line ends, quotes where needed) with a header row, in chunks."""
    columns = result.columns or []
    kinds = [c.type for c in columns]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([c.name for c in columns])
    for n, row in enumerate(result.rows, start=1):
        writer.writerow([values.to_text(v, k) for k, v in zip(kinds, row, strict=True)])
        if n % rows_per_chunk == 0:
            yield buffer.getvalue().encode("utf-8")
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode("utf-8")


_encoder = msgspec.json.Encoder()


def encode_json(body: object) -> bytes:
    try:
        return _encoder.encode(body)
    except (OverflowError, TypeError):
        # An integer beyond 64 bits (a SUM of BIGINTs, say): msgspec refuses, json does not.
        return json.dumps(body, default=str, allow_nan=False).encode("utf-8")


class Answer:
    """A whole answer held in memory, and a WSGI application of its own.

    Most requests get a small JSON answer; building one this way costs a fraction of a
    Werkzeug `Response` with its header object and iterator wrapping. `headers` is the
    list handed to `start_response`, so a header is added by appending to it. `body` may be
    a bytearray (a large answer encoded in place, a change page: no copy of it made into
    bytes), which no one changes once the Answer is made.
    """

    __slots__ = ("status_code", "status", "headers", "body", "wire", "wire_chunk")

    def __init__(
        self,
        body: bytes | bytearray,
        status: int = 200,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status_code = status
        self.status = (
            _STATUS_LINES.get(status) or f"{status} {HTTP_STATUS_CODES.get(status, 'Unknown')}"
        )
        self.headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        if headers:
            self.headers += headers.items()
        self.body = body
        # The server's bytes of it, made once for every reader it goes to: sent whole, with
        # the Date, keep-alive and HEAD they were made for (wire.whole_answer), or as one
        # chunk of a streamed answer (wire.chunk).
        self.wire: tuple[str, bool, bool, bytes] | None = None
        self.wire_chunk: bytes | None = None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Answer:
        start_response(self.status, self.headers)
        # Itself as the WSGI iterable (its body, one part): our server then sees an Answer
        # and sends its bytes in one piece (`wire.answer_bytes`).
        return self

    def __iter__(self) -> Iterator[bytes]:
        body = self.body  # a WSGI server's part is bytes: a bytearray body is copied to it
        return iter((body if type(body) is bytes else bytes(body),))


# The WSGI status of each code Werkzeug names ("200 OK"), made once.
_STATUS_LINES = {code: f"{code} {reason}" for code, reason in HTTP_STATUS_CODES.items()}


def json_response(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return Answer(encode_json(body), status, "application/json", headers)
