"""The small routes: stats, health, the OpenAPI document, browser sessions."""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.errors import UnknownDatabase
from refimpl.http.context import Context
from refimpl.http.encode import json_response


def stats_route(ctx: Context) -> Response:
    """Per database the caller may read: all of them, or only the one `db=` names."""
    instance = ctx.app.instance
    names = instance.database_names()
    if "db" in ctx.args:
        wanted = [n for n in names if n.casefold() == ctx.database.casefold()]
        if not wanted:
            raise UnknownDatabase(ctx.database)
        instance.access.check(ctx.principal, wanted[0], "READ")
    else:
        wanted = [n for n in names if instance.access.allowed(ctx.principal, n, "READ")]
    stats = instance.stats().get("databases", {})
    return json_response({"databases": {n: stats.get(n, {}) for n in wanted}})


def health_route(ctx: Context) -> Response:
    return json_response({"status": "ok"})


def openapi_route(ctx: Context) -> Response:
    return Response(ctx.app.openapi_bytes, content_type="application/json")


def session_open_route(ctx: Context) -> Response:
    return ctx.app.auth.open_session(ctx.request, ctx.app.read_body(ctx.request))


def session_close_route(ctx: Context) -> Response:
    return ctx.app.auth.close_session(ctx.request)
