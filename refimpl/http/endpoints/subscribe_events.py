"""A live query's answers as server-sent events: a long poll's whole answer (`encode_reply`)
and the `id:` line and event a stream's part or a long poll's answer carries, encoded once
for every subscription that shares them."""

from __future__ import annotations

from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.top_n import Move
from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.http.encode import encode_json
from refimpl.http.endpoints.change_encoding import RETRY_MS


def _row(columns: list[Column], row: tuple) -> list[object]:
    return [values.to_json(v, c.type) for c, v in zip(columns, row, strict=True)]


def _key(columns: list[Column], reply: Reply, key: tuple) -> list[object]:
    subscription = reply.subscription
    if subscription.whole_row:
        return _row(columns, key)
    types = {c.name: c.type for c in columns}
    return [values.to_json(v, types[n]) for n, v in zip(subscription.key_columns, key, strict=True)]


def _move(columns: list[Column], move: Move) -> dict[str, object]:
    return {
        "old_offset": move.old_offset,
        "new_offset": move.new_offset,
        "row": _row(columns, move.row),
    }


_RETRY_BLOCK = f"retry: {RETRY_MS}\n\n".encode()


def encode_reply(reply: Reply) -> bytes:
    """A long poll's answer: the `retry` block, then `reply_event`."""
    if reply.kind == "rows":  # most: one piece, its shared event copied once
        event = reply.change.encoded.get("sse") or rows_event(reply)
        return b"%sid: %s.%d\n%s" % (
            _RETRY_BLOCK,
            reply.subscription.id.encode(),
            reply.version,
            event,
        )
    return _RETRY_BLOCK + reply_event(reply)


def reply_event(reply: Reply) -> bytes:
    """The `id:` line and the event of one answer (a stream's part, or a long poll's after
    its `retry`)."""
    head = b"id: " + reply.id.encode() + b"\n"
    if reply.kind == "none":
        return head + b"\n"
    if reply.kind == "rows":
        return head + rows_event(reply)
    return head + _event(reply)


def rows_event(reply: Reply) -> bytes:
    """The event of a `rows` answer after its `id:` line. One change is shared by every
    subscription that had the same two answers: its event is encoded once, for the first
    of them, and is the same bytes object for all."""
    encoded = reply.change.encoded
    event = encoded.get("sse")
    if event is None:
        event = encoded["sse"] = _event(reply)
    return event


def _event(reply: Reply) -> bytes:
    """The `event:` and `data:` lines of a snapshot or rows answer (the same for every
    subscription of the query that had the same answers)."""
    subscription = reply.subscription
    columns = subscription.columns
    described = [{"name": c.name, "type": c.type} for c in columns]
    if reply.kind == "snapshot":
        symbol = subscription.symbol
        body = {
            "table": subscription.select.source.name,  # type: ignore[union-attr]
            "symbol": None if symbol is None else values.to_json(symbol, "STRING"),
            "columns": described,
            "key": None if subscription.whole_row else subscription.key_columns,
            "maintained": subscription.maintained,
            "rows": [_row(columns, r) for r in reply.rows],
        }
    else:
        body = {
            "columns": described,
            "rows": [_row(columns, r) for r in reply.rows],
            "removed": len(reply.removed_keys),
            "removed_keys": [_key(columns, reply, k) for k in reply.removed_keys],
        }
        if reply.moves is not None:
            body["moves"] = [_move(columns, m) for m in reply.moves]
    return b"event: " + reply.kind.encode() + b"\ndata: " + encode_json(body) + b"\n\n"


SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
