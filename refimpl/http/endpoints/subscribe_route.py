"""GET /api/subscribe: a live query as server-sent events.

The first request answers a `snapshot` at once; asked again with its id (`Last-Event-ID`
or `&id=`), a request waits for a commit that changes the answer and sends `rows`. With
nothing changed before `wait` ends, the answer is only the id to ask again with.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.engine.features.live_queries import Reply
from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.http.context import Context
from refimpl.http.encode import encode_json
from refimpl.http.endpoints.changes_route import (
    DEFAULT_WAIT_SSE_MS,
    MAX_WAIT_MS,
    RETRY_MS,
    parse_whole,
)


def _row(columns: list[Column], row: tuple) -> list[object]:
    return [values.to_json(v, c.type) for c, v in zip(columns, row, strict=True)]


def _key(columns: list[Column], reply: Reply, key: tuple) -> list[object]:
    subscription = reply.subscription
    if subscription.whole_row:
        return _row(columns, key)
    types = {c.name: c.type for c in columns}
    return [values.to_json(v, types[n]) for n, v in zip(subscription.key_columns, key, strict=True)]


def encode_reply(reply: Reply) -> bytes:
    subscription = reply.subscription
    columns = subscription.columns
    described = [{"name": c.name, "type": c.type} for c in columns]
    head = f"retry: {RETRY_MS}\n\nid: {reply.id}\n"
    if reply.kind == "none":
        return (head + "\n").encode("utf-8")
    if reply.kind == "snapshot":
        symbol = subscription.symbol
        body = {
            "table": subscription.select.source.name,  # type: ignore[union-attr]
            "symbol": None if symbol is None else values.to_json(symbol, "STRING"),
            "columns": described,
            "key": None if subscription.whole_row else subscription.key_columns,
            "rows": [_row(columns, r) for r in reply.rows],
        }
    else:
        body = {
            "columns": described,
            "rows": [_row(columns, r) for r in reply.rows],
            "removed": len(reply.removed_keys),
            "removed_keys": [_key(columns, reply, k) for k in reply.removed_keys],
        }
    data = encode_json(body).decode("utf-8")
    return f"{head}event: {reply.kind}\ndata: {data}\n\n".encode()


def subscribe_route(ctx: Context) -> Response:
    text = ctx.require("query")
    asked = ctx.args.get("id") or ctx.request.headers.get("Last-Event-ID") or None
    wait_ms = min(parse_whole(ctx.args.get("wait"), "wait", DEFAULT_WAIT_SSE_MS) or 0, MAX_WAIT_MS)
    slots = ctx.app.wait_slots
    holds_slot = wait_ms > 0 and slots.acquire(blocking=False)
    try:
        with ctx.session() as session:
            reply = ctx.app.instance.subscriptions.ask(
                session, text, asked, wait_ms / 1000 if holds_slot else 0.0
            )
    finally:
        if holds_slot:
            slots.release()
    return Response(
        encode_reply(reply),
        content_type="text/event-stream; charset=utf-8",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
