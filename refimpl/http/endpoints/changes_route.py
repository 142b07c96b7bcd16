"""GET /api/changes: a table's change stream as server-sent events or JSON.

Each request reads after a position, waits (within limits) for a commit when there is
nothing new, answers and ends; the client asks again from where the answer says. Readers
that ask for the same position after the same commit share one encoded answer.
"""

from __future__ import annotations

import functools
import math
import time

import msgspec

from refimpl.engine.features.change_stream import KEY, OP, ROW, Change, ChangeBatch
from refimpl.engine.storage import values
from refimpl.errors import BadRequest
from refimpl.http.context import Context, parse_whole
from refimpl.http.encode import Answer, encode_json
from refimpl.waiting.parked import Parked

DEFAULT_LIMIT = 1000
DEFAULT_WAIT_SSE_MS = 25_000
MAX_WAIT_MS = 55_000
RETRY_MS = 1000
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
JSON_HEADERS = {"Cache-Control": "no-store"}


class ChangeEvent(msgspec.Struct):
    """One change as the JSON object of the stream, in the order of its fields."""

    lsn: int
    seq: int
    committed_at: str
    op: str
    key: str | None
    row: object


@functools.lru_cache(maxsize=256)
def _row_type(names: tuple[str, ...]) -> type[msgspec.Struct]:
    """A struct that encodes as `{name: value, ...}` for these column names: made from a
    row's values in C, with no dict per row. Fields are named f0, f1, ... and renamed to the
    columns, so that any column name works."""
    fields = [f"f{index}" for index in range(len(names))]
    return msgspec.defstruct("Row", fields, rename=dict(zip(fields, names, strict=True)))


class ChangeObjects:
    """Makes the JSON object of each change of one table's stream (`row` only for an upsert).

    Built once per answer: it knows which columns need converting (timestamps to text,
    non-finite doubles to null, as `values.to_json` does) and leaves the others as they are,
    and it formats a transaction's `committed_at` once for all its rows.
    """

    def __init__(self, names: tuple[str, ...], types: dict[str, str]) -> None:
        self._row = _row_type(names)
        self._timestamps = [i for i, name in enumerate(names) if types[name] == "TIMESTAMP"]
        self._doubles = [i for i, name in enumerate(names) if types[name] == "DOUBLE"]
        self._lsn = -1
        self._committed_at = ""

    def __call__(self, change: Change) -> ChangeEvent:
        lsn = change[0]
        if lsn != self._lsn:
            self._lsn, self._committed_at = lsn, values.format_timestamp(change[2])
        row = None
        if change[OP] == "upsert":
            cells = change[ROW:]
            if self._timestamps or self._doubles:
                cells = list(cells)
                for at in self._timestamps:
                    if (value := cells[at]) is not None:
                        cells[at] = values.format_timestamp(value)
                for at in self._doubles:
                    if (value := cells[at]) is not None and not math.isfinite(value):
                        cells[at] = None
            row = self._row(*cells)
        return ChangeEvent(lsn, change[1], self._committed_at, change[OP], change[KEY], row)


def encode_sse(batch: ChangeBatch, names: tuple[str, ...], types: dict[str, str]) -> bytes:
    """Events: `change` per row (`id` on a transaction's last row), then `position`."""
    parts = [f"retry: {RETRY_MS}\n\n".encode()]
    changes = batch.changes
    objects = ChangeObjects(names, types)
    for index, change in enumerate(changes):
        last_of_transaction = index + 1 == len(changes) or changes[index + 1][0] != change[0]
        head = f"id: {change[0]}\nevent: change\ndata: " if last_of_transaction else (
            "event: change\ndata: ")  # fmt: skip
        parts += (head.encode(), encode_json(objects(change)), b"\n\n")
    position = encode_json({"next": batch.next_lsn, "more": batch.more}).decode("utf-8")
    parts.append(f"id: {batch.next_lsn}\nevent: position\ndata: {position}\n\n".encode())
    return b"".join(parts)


def encode_json_answer(
    table: str,
    batch: ChangeBatch,
    names: tuple[str, ...],
    types: dict[str, str],
    durable: int,
    oldest: int,
) -> bytes:
    objects = ChangeObjects(names, types)
    return encode_json(
        {
            "table": table,
            "changes": [objects(c) for c in batch.changes],
            "next": batch.next_lsn,
            "more": batch.more,
            "durable_lsn": durable,
            "oldest_lsn": oldest,
        }
    )


def changes_route(ctx: Context) -> Answer | Parked[Answer]:
    args = ctx.args
    table_name = ctx.require("table")
    fmt = args.get("format", "sse")
    if fmt not in ("sse", "json"):
        raise BadRequest(f"the parameter 'format' must be sse or json, not '{fmt}'")
    start = ctx.whole("from", None)
    if start is None:
        header = ctx.request.headers.get("Last-Event-ID")
        start = parse_whole(header, "Last-Event-ID", 0) if header else 0
    limit = ctx.whole("limit", DEFAULT_LIMIT, minimum=1)
    wait_default = DEFAULT_WAIT_SSE_MS if fmt == "sse" else 0
    wait_ms = min(ctx.whole("wait", wait_default) or 0, MAX_WAIT_MS)
    assert start is not None and limit is not None

    feed = ctx.app.feeds.table_feed(ctx.database, table_name, ctx.principal)
    names, types = feed.column_names, feed.column_types
    # Strings hash in C and keep their hash: the key is built again at every attempt.
    columns = tuple(f"{name}:{types[name]}" for name in names)

    def answer(durable: int) -> tuple[Answer, bool]:
        """The answer from `start` on, made when at least `durable` was durable; shared by
        every reader asking the same (a round of readers asks with one `durable`)."""
        key = (feed.database, feed.table.lower(), columns, start, limit, fmt, durable)

        def produce() -> tuple[Answer, bool]:
            # Read the bounds first: the answer then never claims less than it holds.
            bounds = feed.bounds()
            batch = feed.read(start, limit)
            if fmt == "sse":
                return respond(encode_sse(batch, names, types)), bool(batch.changes)
            body = encode_json_answer(
                feed.table,
                batch,
                names,
                types,
                max(bounds.durable_lsn, batch.next_lsn if batch.next_lsn > start else 0),
                bounds.oldest_lsn,
            )
            return respond(body), bool(batch.changes)

        return ctx.app.shared_answers.get(key, produce)

    def respond(body: bytes) -> Answer:
        if fmt == "sse":
            return Answer(body, 200, "text/event-stream; charset=utf-8", SSE_HEADERS)
        return Answer(body, 200, "application/json", JSON_HEADERS)

    seen = feed.published_lsn()  # before the read: a commit after it is attempted again
    shared, found = answer(feed.bounds().durable_lsn)
    slots = ctx.app.wait_slots
    room = ctx.app.waiting_room
    if found and wait_ms > 0 and room.paced(feed.signal):
        seen = -1  # news already: the next round answers it, whether or not more commits come
    elif found or wait_ms <= 0:
        return respond(shared.body)  # its own: the app adds this request's timing to it
    if not slots.acquire(blocking=False):
        return respond(shared.body)

    # A parked request's answer goes out as it is: readers answered together share one.
    def attempt(durable: int) -> Answer | None:
        shared, found = answer(durable)
        return shared if found else None

    def on_timeout() -> Answer:
        return answer(feed.bounds().durable_lsn)[0]

    parked: Parked[Answer] = Parked(
        feed.signal, seen, attempt, on_timeout, time.monotonic() + wait_ms / 1000,
        slots.release, paced=True,
    )
    room.park(parked)
    return parked
