"""The changefeed options of a request's query (spec: changefeeds): checked, typed, or 400."""

from __future__ import annotations

from refimpl.engine.features.feed_options import FeedOptions
from refimpl.errors import BadRequest
from refimpl.http.context import Context

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")
MAX_SQUASH_SECONDS = 55.0  # as long as an answer may wait (`wait`)


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
    squash_seconds = _squash_seconds(ctx.args.get("squash"))
    where = ctx.args.get("where")
    if where is not None and not where.strip():
        raise BadRequest(
            "the parameter 'where' takes a predicate over the table's columns, as in where=id = 1"
        )
    return FeedOptions(
        types=flag(ctx, "types"),
        states=flag(ctx, "states"),
        squash=squash_seconds is not None,
        where=where,
        initial=flag(ctx, "initial"),
        squash_seconds=squash_seconds or 0.0,
    )


def _squash_seconds(text: str | None) -> float | None:
    """`squash`: None when off, 0 for `true`, else the seconds to wait for more."""
    # Numbers are seconds here (squash=1 waits a second), as in the document's `squash: n`.
    word = None if text is None else text.strip().lower()
    if word is None or word == "false":
        return None
    if word == "true":
        return 0.0
    try:
        seconds = float(word)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_SQUASH_SECONDS:
        raise BadRequest(
            f"the parameter 'squash' must be true, false or a number of seconds above 0 and"
            f" at most {MAX_SQUASH_SECONDS:g}, not '{text}'"
        )
    return seconds
