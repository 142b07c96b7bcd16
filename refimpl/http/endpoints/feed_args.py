"""The changefeed options of a request's query (spec: changefeeds): checked, typed, or 400."""

from __future__ import annotations

from refimpl.engine.features.feed_options import FeedOptions
from refimpl.errors import BadRequest
from refimpl.http.context import Context

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


def flag(ctx: Context, name: str) -> bool:
    """`name=true|false` (also 1/0, yes/no); absent is false; anything else a 400."""
    text = ctx.args.get(name)
    if text is None:
        return False
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise BadRequest(f"the parameter '{name}' must be true or false, not '{text}'")


def feed_options(ctx: Context) -> FeedOptions:
    """The options of `GET /api/changes`; a 400 naming the first wrong one."""
    squash = ctx.args.get("squash")
    if squash is not None and squash.strip().lower() not in (*_TRUE, *_FALSE):
        raise BadRequest(
            f"the parameter 'squash' must be true or false, not '{squash}'"
            " (squash=<seconds> is not served yet)"
        )
    where = ctx.args.get("where")
    if where is not None and not where.strip():
        raise BadRequest("the parameter 'where' takes a predicate over the table's columns,"
                         " as in where=id = 1")
    return FeedOptions(
        types=flag(ctx, "types"), states=flag(ctx, "states"), squash=flag(ctx, "squash"),
        where=where, initial=flag(ctx, "initial"),
    )
