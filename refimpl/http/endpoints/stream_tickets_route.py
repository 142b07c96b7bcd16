"""POST /stream/tickets: a one-time ticket for a browser's `EventSource`.

Answers `{"ticket", "expires_at"}`. It needs what the stream needs (an authenticated caller
with a right in the database, and READ on each `table=` named); the ticket then opens one
stream of that database, as the token that asked for it.
"""

from __future__ import annotations

from refimpl.engine.storage import values
from refimpl.errors import BadRequest
from refimpl.http.context import Context
from refimpl.http.encode import Answer, json_response
from refimpl.http.endpoints.stream_credentials import request_credential

HEADERS = {"Cache-Control": "no-store"}


def stream_tickets_route(ctx: Context) -> Answer:
    tables = ctx.request.args.getlist("table")
    if any(not t.strip() for t in tables):
        raise BadRequest("the parameter 'table' names a table; leave it out to follow all")
    credential = request_credential(ctx)
    streams = ctx.app.streams
    streams.check_readable(credential.principal, ctx.database, tables)
    ticket, expires_at = streams.tickets.issue(credential.token_key, ctx.database)
    body = {
        "ticket": ticket,
        "expires_at": values.format_timestamp(int(expires_at * 1_000_000)),
    }
    return json_response(body, 200, HEADERS)
