"""`GET /metrics`: the server's metrics in the Prometheus text format, for the admin user."""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.errors import Forbidden, Unauthorized
from refimpl.http.context import Context


def metrics_route(ctx: Context) -> Response:
    """The metrics of `spec/operations.md`; OpenMetrics when the Accept header asks for it.

    Only the `admin` user may read them: they cover every database, so a right in one
    database is not enough.
    """
    principal = ctx.principal
    if principal.name is None:
        raise Unauthorized(
            "GET /metrics needs the admin user's token; send 'Authorization: Bearer <token>'"
        )
    if not principal.is_admin:
        raise Forbidden(
            f"{principal.describe()} may not read /metrics, which covers every database;"
            " scrape it with a token of the admin user"
        )
    body, content_type = ctx.app.metrics.exposition(ctx.request.headers.get("Accept"))
    return Response(body, content_type=content_type)
