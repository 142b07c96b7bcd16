"""Results as the HTTP API shows them: JSON answers of /exec and CSV of /exp.

Values are converted by `refimpl.engine.values` (one place for their text forms): TIMESTAMP
becomes ISO-8601 text ending in `Z` with milliseconds, microseconds only when there are any
below the millisecond (`2026-10-22T05:43:31.573Z`); a DOUBLE that is not finite is null.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Sequence

import msgspec
from werkzeug.wrappers import Response

from refimpl.engine import values
from refimpl.engine.result import Column, Result


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
            "columns": [{"name": c.name, "type": c.type} for c in result.columns],
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


def json_response(
    body: object, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        encode_json(body), status=status, headers=headers, content_type="application/json"
    )
