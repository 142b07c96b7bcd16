"""GET /api/changes: a table's change stream as server-sent events or JSON.

Each request reads after a position, waits (within limits) for a commit when there is
nothing new, answers and ends; the client asks again from where the answer says. Readers
that ask for the same position after the same commit share one encoded answer.
"""

from __future__ import annotations

import math
import time

from refimpl.engine.features.feed_options import ShapedBatch
from refimpl.engine.features.initial_copy import CopyPosition
from refimpl.engine.feeds import FeedRequest
from refimpl.errors import BadRequest
from refimpl.http.context import Context, parse_whole
from refimpl.http.encode import Answer
from refimpl.http.endpoints.change_encoding import (
    JSON_HEADERS,
    PLAIN,
    SSE_HEADERS,
    Shaping,
    encode_json_answer,
    encode_sse,
)
from refimpl.http.endpoints.feed_args import feed_options
from refimpl.http.endpoints.initial_answer import copy_answer, copy_position
from refimpl.waiting.parked import READER, Parked, Part
from refimpl.waiting.places import place_owner

DEFAULT_LIMIT = 1000
DEFAULT_WAIT_SSE_MS = 25_000
MAX_WAIT_MS = 55_000


def changes_route(ctx: Context) -> Answer | Parked[Answer]:
    args = ctx.args
    table_name = ctx.require("table")
    fmt = args.get("format", "sse")
    if fmt not in ("sse", "json"):
        raise BadRequest(f"the parameter 'format' must be sse or json, not '{fmt}'")
    options = feed_options(ctx)
    limit = ctx.whole("limit", DEFAULT_LIMIT, minimum=1)
    assert limit is not None
    request = FeedRequest(table_name, options, _position(ctx, options.initial), limit)
    if request.in_copy:
        # Inside the copy the answer comes at once; past it, the feed is the change stream.
        at = request.position if isinstance(request.position, CopyPosition) else None
        return copy_answer(ctx, table_name, options, at, limit, fmt)
    wait_default = DEFAULT_WAIT_SSE_MS if fmt == "sse" else 0
    wait_ms = min(ctx.whole("wait", wait_default) or 0, MAX_WAIT_MS)
    feeds = ctx.app.feeds
    planned = [feeds.plan(ctx.database, request, ctx.principal)]
    feed = planned[0].feed  # its database's signal and bounds, whatever its schema
    feed_filter = planned[0].feed_filter

    def answer(durable: int) -> tuple[Answer, bool]:
        """The answer from the request's start on, made when at least `durable` was
        durable; shared by every reader asking the same (a round of readers asks with one
        `durable`). Planned again when the table's schema changed while it waited."""
        plan = planned[0] = feeds.current(planned[0], ctx.database, request, ctx.principal)
        feed, start = plan.feed, plan.start
        names, types = feed.column_names, feed.column_types

        def produce() -> tuple[Answer, bool]:
            # Read the bounds first: the answer then never claims less than it holds.
            bounds = feed.bounds()
            batch = plan.read()  # a plain page is read as it is encoded
            shaping = PLAIN
            if isinstance(batch, ShapedBatch):
                shaping = Shaping(feed.before_images, batch.types, plan.ready)
            if fmt == "sse":
                return respond(encode_sse(batch, names, types, shaping)), plan.found(batch)

            def durable(next_lsn: int) -> int:
                return max(bounds.durable_lsn, next_lsn if next_lsn > start else 0)

            body = encode_json_answer(
                feed.table,
                batch,
                names,
                types,
                durable,
                bounds.oldest_lsn,
                shaping,
            )
            return respond(body), plan.found(batch)

        return ctx.app.shared_answers.get(plan.share_key(fmt, durable), produce)

    def respond(body: bytes | bytearray) -> Answer:
        if fmt == "sse":
            return Answer(body, 200, "text/event-stream; charset=utf-8", SSE_HEADERS)
        return Answer(body, 200, "application/json", JSON_HEADERS)

    # A filter is work of the client's choosing: it runs within the statement timeout, on
    # this request's thread now and on its owner's share of the room's pool later (never
    # on the room's thread, which every other user's waits depend on).
    budget = ctx.app.feeds.work_budget
    seen = feed.published_lsn()  # before the read: a commit after it is attempted again
    with budget():
        shared, found = answer(feed.bounds().durable_lsn)
    room = ctx.app.waiting_room
    # squash=<seconds>: a resumed answer is held that long to squash what comes meanwhile
    # (the first answer, from the start, never is).
    hold_s = planned[0].hold_s
    if not hold_s and wait_ms <= 0:
        return respond(shared.body)  # answered now: no wait place is looked at
    places = room.wait_places(ctx.app.wait_slots)  # shared fairly by user
    owner = place_owner(ctx.principal.name, ctx.principal.is_admin)
    if hold_s and places.take(owner):

        def held_answer(_durable: int) -> Answer:
            return answer(feed.bounds().durable_lsn)[0]

        # A filtered one's answer is its owner's work too: made on the room's pool once the
        # hold is over (`due`), and handed over by the attempt its end asks for.
        held_work = room.offload(owner, budget, held_answer) if feed_filter is not None else None
        due = [False]

        def held_attempt(durable: int) -> Answer | Part[Answer] | None:
            return held_work(durable) if held_work is not None and due[0] else None

        def held_timeout() -> Answer | Part[Answer] | None:
            if held_work is None:
                return held_answer(0)
            due[0], held.deadline = True, math.inf
            held_work(0)  # starts its work; the answer is what that work makes
            return held_work.at_deadline(lambda: shared)

        held: Parked[Answer] = Parked(
            feed.signal,
            seen,
            held_attempt,
            held_timeout,
            time.monotonic() + hold_s,
            lambda: places.give_back(owner),
            kind=READER,
        )
        if held_work is not None:
            held_work.bind(held)
        room.park(held)
        return held
    if found and wait_ms > 0 and room.paced(feed.signal):
        seen = -1  # news already: the next round answers it, whether or not more commits come
    elif found or wait_ms <= 0:
        return respond(shared.body)  # its own: the app adds this request's timing to it
    if not places.take(owner):  # every place taken, or its user's share
        return respond(shared.body)

    latest = [shared]  # the last answer made (a filtered request's, on its user's budget)

    # A parked request's answer goes out as it is: readers answered together share one.
    def attempt(durable: int) -> Answer | None:
        shared, found = answer(durable)
        latest[0] = shared
        return shared if found else None

    def on_timeout() -> Answer | Part[Answer] | None:
        if offloaded is None:
            return answer(feed.bounds().durable_lsn)[0]
        # Nothing it matched came in time: its last answer (`next` past what it read), for
        # the room's thread never runs a filter. But while its filter still looks at a
        # commit, the answer waits for it (within the statement timeout): a filter over the
        # timeout answers the timeout's 400, as it does when the request is read.
        found = offloaded.at_deadline(lambda: latest[0])
        if found is None:
            parked.deadline = math.inf
        return found

    offloaded = None
    if feed_filter is not None:
        offloaded = room.offload(owner, budget, attempt)
    parked: Parked[Answer] = Parked(
        feed.signal,
        seen,
        offloaded or attempt,
        on_timeout,
        time.monotonic() + wait_ms / 1000,
        lambda: places.give_back(owner),
        kind=READER,
    )
    if offloaded is not None:
        offloaded.bind(parked)
    room.park(parked)
    return parked


def _position(ctx: Context, initial: bool) -> CopyPosition | int:
    """Where the reader stands: `from`, else `Last-Event-ID`, else the start (0); inside an
    initial copy, a place in it."""
    if initial:
        return copy_position(ctx)
    start = ctx.whole("from", None)
    if start is None:
        header = ctx.request.headers.get("Last-Event-ID")
        start = parse_whole(header, "Last-Event-ID", 0) if header else 0
    assert start is not None
    return start
