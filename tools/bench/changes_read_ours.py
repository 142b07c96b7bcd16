"""`changes_read.py`'s reads of refimpl: the rows written with the embedded API, read back by
`changes()` in process, and by lean clients of `/api/changes` in pages (JSON, counted in the
bytes or `--decode`d into a struct a change, and SSE) through a fresh server each
(`read_ours`). `versions.py` reads two revisions with the same clients."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import harness
import msgspec
from changes_reading import Reading
from raw_readers import RawHTTP

import refimpl

PAGE_SQL = 50_000
PAGE_HTTP = 10_000
UPSERT = b'"op":"upsert"'


def memory(start: bool = False) -> str:
    """The reader's RSS; at the start of a read the peak starts anew."""
    if start:
        harness.reset_peak_rss()
    current, peak = harness.rss_mb()
    return f"RSS {current:,.0f} MB, peak since the read began {peak:,.0f} MB (ru_maxrss)"


def write_refimpl(folder: Path, rows: int, txn_rows: int) -> tuple[int, float]:
    """Commit the rows with the embedded API; the LSN before them and the seconds taken."""
    with refimpl.connect(folder) as connection:
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
        start = connection.instance.database("demo").log.durable_lsn
        session = connection.session()
        began = time.perf_counter()
        for first in range(0, rows, txn_rows):
            batch = [(i, i * 0.5, f"row {i}") for i in range(first, min(rows, first + txn_rows))]
            session.insert_rows("t", ["id", "v", "s"], batch)
        elapsed = time.perf_counter() - began
        session.close()
    return start, elapsed


def read_changes_sql(folder: Path, after: int, expected: int) -> float:
    with refimpl.connect(folder) as connection:
        print(f"  changes(): before reading: {memory(start=True)}")
        count = 0
        began = time.perf_counter()
        while True:
            result = connection.execute(f"SELECT * FROM changes('t', {after}, {PAGE_SQL})")
            if not result.rows:
                break
            count += sum(1 for row in result.rows if row[3] == "upsert")
            after = result.rows[-1][0]
        elapsed = time.perf_counter() - began
        print(f"  changes(): after reading:  {memory()}")
    if count != expected:
        print(f"  warning: changes() gave {count} rows, expected {expected}")
    return count / elapsed


# --- the lean readers -----------------------------------------------------------------------


def _target(page: int, fmt: str, options: dict[str, str] | None) -> str:
    """A page's request target but its position, which is appended to it."""
    query = {"table": "t", "format": fmt, "wait": "0", "limit": str(page), **(options or {})}
    return "/api/changes?" + urlencode(query) + "&from="


class Change(msgspec.Struct):
    """A change as `--decode` reads it: its fields, its row left as JSON text."""

    lsn: int = 0
    seq: int = 0
    committed_at: str | None = None
    op: str = ""
    key: str | None = None
    row: msgspec.Raw = msgspec.Raw(b"null")


class JsonPage(msgspec.Struct):
    changes: list[Change]
    next: int
    more: bool


_decode_page = msgspec.json.Decoder(JsonPage).decode


def read_changes_http(
    server: harness.RefimplServer,
    after: int,
    expected: int,
    page: int = PAGE_HTTP,
    options: dict[str, str] | None = None,
    decode: bool = False,
) -> float:
    """Rows/s reading the feed as JSON in pages of `page` from `after`, the rows counted in
    each body (`decode`: decoded, a struct per change); `options` are further changefeed
    options of each request (`where`, `squash`, `types`: `versions.py`'s shaped read)."""
    client = RawHTTP(server.url, server.headers)
    target = _target(page, "json", options)
    count = 0
    began = time.perf_counter()
    while True:
        body = client.get(target + str(after))
        if decode:
            parsed = _decode_page(body)
            count += sum(1 for c in parsed.changes if c.op == "upsert")
            after, more = parsed.next, parsed.more
        else:
            count += body.count(UPSERT)
            # The answer's fields after `changes` are `next`, `more`, `durable_lsn`,
            # `oldest_lsn`, all numbers or booleans: the last `"next":` is the answer's.
            at = body.rindex(b'"next":') + 7
            after = int(body[at : body.index(b",", at)])
            more = b'"more":true' in body[at:]
        if not more:
            break
    elapsed = time.perf_counter() - began
    client.close()
    if count != expected:
        print(f"  warning: /api/changes gave {count} rows, expected {expected}")
    return count / elapsed


def read_changes_sse(
    server: harness.RefimplServer, after: int, expected: int, page: int = PAGE_HTTP
) -> float:
    """The same pages as server-sent events (format=sse, wait=0): the rows' `change` events
    counted in the bytes, the next page from the `position` event's id."""
    client = RawHTTP(server.url, server.headers)
    target = _target(page, "sse", None)
    count = 0
    began = time.perf_counter()
    while True:
        body = client.get(target + str(after))
        count += body.count(UPSERT)
        position = body.rindex(b"event: position")  # after its `id: <next>` line
        after = int(body[body.rindex(b"id: ", 0, position) + 4 : position].strip())
        if b'"more":true' not in body[position:]:
            break
    elapsed = time.perf_counter() - began
    client.close()
    if count != expected:
        print(f"  warning: /api/changes format=sse gave {count} rows, expected {expected}")
    return count / elapsed


def read_ours(
    folder: Path,
    start: int,
    rows: int,
    read: Callable[..., float],
    page: int,
    decode: bool,
    code: Path | None = None,
) -> Reading:
    """One read through a fresh server of its own on the data folder (`code`: the server of
    that checkout, `--before`'s)."""
    extra: dict[str, Any] = {"decode": True} if decode else {}
    with harness.RefimplServer(threads=16, data=folder, code=code) as server:
        reading = Reading.start(server.pid)
        rate = read(server, start, rows, page, **extra)
        done = reading.end(rows)
    return Reading(rate, done.server_us, done.client_us, done.runq_us)
