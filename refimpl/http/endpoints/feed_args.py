"""The changefeed options of a request's query (spec: changefeeds): checked, typed, or 400.

The options themselves are declared once, in the engine (`feed_options.FEED_OPTIONS`).
"""

from __future__ import annotations

from refimpl.engine.features.feed_options import FeedOptions, parse_feed_options, read_flag
from refimpl.http.context import Context


def flag(ctx: Context, name: str) -> bool:
    """`name=true|false` (also 1/0, yes/no); absent is false; anything else a 400."""
    text = ctx.args.get(name)
    return False if text is None else read_flag(name, text)


def feed_options(ctx: Context) -> FeedOptions:
    """The options of `GET /api/changes` and `GET /stream/changes`; a 400 naming the first
    wrong one."""
    return parse_feed_options(ctx.args)
