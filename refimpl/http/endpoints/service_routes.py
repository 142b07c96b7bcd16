"""The small routes: stats, health, the OpenAPI document, browser sessions."""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.http.context import Context
from refimpl.http.encode import Answer, json_response


def stats_route(ctx: Context) -> Answer:
    """Per database the caller may read: all of them, or only the one `db=` names."""
    asked = ctx.database if "db" in ctx.args else None
    return json_response({"databases": ctx.app.feeds.readable_stats(ctx.principal, asked)})


def health_route(ctx: Context) -> Answer:
    return json_response({"status": "ok"})


def openapi_route(ctx: Context) -> Response:
    return Response(ctx.app.openapi_bytes, content_type="application/json")


def session_open_route(ctx: Context) -> Response:
    return ctx.app.auth.open_session(ctx.request, ctx.app.read_body(ctx.request))


def session_close_route(ctx: Context) -> Response:
    return ctx.app.auth.close_session(ctx.request)
