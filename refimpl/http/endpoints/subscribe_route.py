"""GET /api/subscribe: a live query as server-sent events.

The first request answers a `snapshot` at once; asked again with its id (`Last-Event-ID`
or `&id=`), a request waits for a commit that changes the answer and sends `rows`. With
nothing changed before `wait` ends, the answer is only the id to ask again with. With
`offsets=true` (an ordered, limited query) each `rows` answer also holds its `moves`.
"""

from __future__ import annotations

import threading
import time

from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.top_n import Move
from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.http.context import Context
from refimpl.http.encode import Answer, encode_json
from refimpl.http.endpoints.change_encoding import RETRY_MS
from refimpl.http.endpoints.changes_route import DEFAULT_WAIT_SSE_MS, MAX_WAIT_MS
from refimpl.http.endpoints.feed_args import flag
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.places import place_owner
from refimpl.waiting.room import WaitingRoom


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
    return _RETRY_BLOCK + reply_event(reply)


def reply_event(reply: Reply) -> bytes:
    """The `id:` line and the event of one answer (a stream's part, or a long poll's after
    its `retry`)."""
    head = b"id: " + reply.id.encode() + b"\n"
    if reply.kind == "none":
        return head + b"\n"
    if reply.kind == "rows":
        # One change is shared by every subscription that had the same two answers: its
        # event is encoded once, for the first of them.
        encoded = reply.change.encoded
        event = encoded.get("sse")
        if event is None:
            event = encoded["sse"] = _event(reply)
        return head + event
    return head + _event(reply)


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


class _Poke:
    """Wakes a parked live-query request from the engine's wake board (cheap, never blocks).

    A wake-up that comes before the request is parked is kept and handed on at `attach`:
    the room is woken for a request only when a commit touched what it reads."""

    def __init__(self, room: WaitingRoom) -> None:
        self.room = room
        self._lock = threading.Lock()
        self._parked: Parked[Answer] | None = None
        self._missed = False

    def set(self) -> None:
        with self._lock:
            parked = self._parked
            self._missed = parked is None
        if parked is not None:
            self.room.poke(parked)

    def attach(self, parked: Parked[Answer]) -> None:
        """`parked` is the request to wake; poked at once if a wake-up came before."""
        with self._lock:
            self._parked = parked
            missed = self._missed
        if missed:
            self.room.poke(parked)


def _respond(reply: Reply) -> Answer:
    return Answer(encode_reply(reply), 200, "text/event-stream; charset=utf-8", SSE_HEADERS)


def subscribe_route(ctx: Context) -> Answer | Parked[Answer]:
    text = ctx.require("query")
    asked = ctx.args.get("id") or ctx.request.headers.get("Last-Event-ID") or None
    wait_ms = min(ctx.whole("wait", DEFAULT_WAIT_SSE_MS) or 0, MAX_WAIT_MS)
    offsets = flag(ctx, "offsets")
    # The session lives as long as the request waits: the waiting room runs the query
    # again with it when a commit touches what it reads.
    session = ctx.app.instance.session(database=ctx.database, principal=ctx.principal)
    budget = ctx.app.feeds.work_budget
    try:
        with budget():
            step = ctx.app.instance.subscriptions.ask(session, text, asked, offsets)
    except BaseException:
        session.close()
        raise
    if isinstance(step, Reply):
        session.close()
        return _respond(step)
    room = ctx.app.waiting_room
    owner = place_owner(ctx.principal.name, ctx.principal.is_admin)
    places = room.wait_places(ctx.app.wait_slots)  # shared fairly by user
    if wait_ms <= 0 or not places.take(owner):
        session.close()
        with budget():
            return _respond(step.attempt() or step.expire())
    poke = _Poke(room)
    step.watch(poke)
    with budget():
        reply = step.attempt()  # a commit between the read and the watch is not missed
    if reply is not None:
        places.give_back(owner)
        session.close()
        return _respond(reply)

    def release() -> None:
        places.give_back(owner)
        session.close()

    def attempt(_: int) -> Answer | None:
        found = step.attempt()
        return None if found is None else _respond(found)

    # Every re-run is work of the client's choosing (a window's sort, a WHERE, the changed
    # buckets' rows, a maintained answer's update): on its owner's share of the room's pool,
    # within the statement timeout, never on the room's thread.
    offloaded = room.offload(owner, budget, attempt)
    parked: Parked[Answer] = Parked(
        None,
        0,
        offloaded,
        lambda: _respond(step.expire()),
        time.monotonic() + wait_ms / 1000,
        release,
        kind=Kind.LIVE,
    )
    offloaded.bind(parked)
    room.park(parked)
    poke.attach(parked)
    return parked
