"""`GET /api/changes?initial=true` inside the copy: pages of the table's rows and the changes
between them, answered at once (spec: changefeeds, initial). Past the copy the feed is the
change stream, answered by `changes_route`."""

from __future__ import annotations

from itertools import repeat
from typing import Any

from refimpl.engine.features.change_stream import CHUNK_ROWS
from refimpl.engine.features.feed_options import FeedOptions, type_of
from refimpl.engine.features.initial_copy import (
    INITIAL,
    CopyPosition,
    InitialBatch,
    parse_position,
)
from refimpl.engine.feeds import LogBounds, TableFeed
from refimpl.engine.query.deadlines import make_way, working_for
from refimpl.http.context import Context
from refimpl.http.encode import Answer, encode_json
from refimpl.http.endpoints.change_encoding import (
    JSON_HEADERS,
    RETRY_MS,
    SSE_HEADERS,
    ChangeObjects,
    json_array,
    json_lines,
    state,
)


def copy_position(ctx: Context) -> CopyPosition | int:
    """`from`, else `Last-Event-ID`, as a position of an initial feed (0: from the start)."""
    text = ctx.args.get("from")
    what = "from"
    if text is None:
        text, what = ctx.request.headers.get("Last-Event-ID"), "Last-Event-ID"
    if text is None or not text.strip():
        return 0
    return parse_position(text, what)


def _id(position: CopyPosition | int) -> str:
    return position.event_id() if isinstance(position, CopyPosition) else str(position)


def _next(position: CopyPosition | int) -> str | int:
    """`next` of an answer: an LSN past the copy (as without `initial`), an id inside it."""
    return position.event_id() if isinstance(position, CopyPosition) else position


def copy_answer(
    ctx: Context, table: str, options: FeedOptions, at: CopyPosition | None, limit: int, fmt: str
) -> Answer:
    """The next page of the copy from `at` (None: its start), as JSON or SSE."""
    feed = ctx.app.feeds.table_feed(ctx.database, table, ctx.principal)
    feed_filter = None if options.where is None else feed.compile_filter(options.where)
    bounds = feed.bounds()
    # The page is its user's work: bounded in rows, in pages at once and in time, and its
    # encoding too (which costs more than its read), taking turns with other users' work
    # as its user's (one turn a round for the user, however many pages it reads at once).
    with ctx.app.feeds.copy_page(ctx.principal, limit), working_for(ctx.principal.name):
        batch = feed.read_initial(at, limit, feed_filter)
        answer = _page_answer(feed, bounds, options, at, batch, fmt)
        if batch.copied is not None:
            copied = batch.copied
            _release(copied.rows, copied.keys, copied.places)
        return answer


def _release(*lists: list[Any]) -> None:
    """Empties long lists a chunk at a time, making way between: freeing a page's objects all
    at once is one C step that holds the interpreter lock (tens of milliseconds a page)."""
    for items in lists:
        while items:
            del items[-CHUNK_ROWS:]
            make_way()


def _page_answer(
    feed: TableFeed,
    bounds: LogBounds,
    options: FeedOptions,
    at: CopyPosition | None,
    batch: InitialBatch,
    fmt: str,
) -> Answer:
    """A page read from `at` as JSON or SSE."""
    full = feed.before_images
    objects = ChangeObjects(feed.column_names, feed.column_types)
    changes = []
    for item in batch.changes:
        change = item.change
        kind = None
        if options.types:
            kind = INITIAL if change.op == INITIAL else type_of(change)
        changes.append(objects.with_options(change, full, kind))
    copied = [] if batch.copied is None else objects.of_copied(batch.copied, options.types)
    states = []
    if options.states and at is None:
        states.append(state("initializing", options.types))
    end = [state("ready", options.types)] if options.states and not batch.copying else []
    if fmt == "json":
        body = encode_json(
            {
                "table": feed.table,
                "changes": json_array([*states, *changes, *copied, *end]),
                "next": _next(batch.position),
                "more": batch.copying,
                "durable_lsn": bounds.durable_lsn,
                "oldest_lsn": bounds.oldest_lsn,
            }
        )
        _release(copied, changes)
        return Answer(body, 200, "application/json", JSON_HEADERS)
    parts = [f"retry: {RETRY_MS}\n\n".encode()]
    parts += [b"event: state\ndata: " + encode_json(s) + b"\n\n" for s in states]
    for event, item in zip(changes, batch.changes, strict=True):
        head = (
            "event: change\ndata: "
            if item.position is None
            else (f"id: {_id(item.position)}\nevent: change\ndata: ")
        )
        parts += (head.encode(), encode_json(event), b"\n\n")
    if batch.copied is not None:
        # Each row is an event with its id: the pieces joined in C, no step per row.
        ids = map(str.encode, batch.copied.event_ids())
        parts += map(
            b"".join,
            zip(
                repeat(b"id: "),
                ids,
                repeat(b"\nevent: change\ndata: "),
                json_lines(copied),
                repeat(b"\n\n"),
            ),
        )
    parts += [b"event: state\ndata: " + encode_json(s) + b"\n\n" for s in end]
    position = encode_json({"next": _next(batch.position), "more": batch.copying}).decode()
    parts.append(f"id: {_id(batch.position)}\nevent: position\ndata: {position}\n\n".encode())
    body = b"".join(parts)
    _release(parts, copied, changes)
    return Answer(body, 200, "text/event-stream; charset=utf-8", SSE_HEADERS)
