"""Who opens an event stream or asks for a ticket, and the token its limits count against.

A stream needs an authenticated caller, even where PUBLIC may read, since its limits count
per token and per user: a bearer token, the session cookie, or (for the stream only) a
ticket of `POST /stream/tickets`. With `--dev` every request acts as the admin user, under
one shared key.
"""

from __future__ import annotations

from refimpl.engine.event_streams import Credential
from refimpl.errors import BadRequest, Unauthorized
from refimpl.http.auth import SESSION_COOKIE, log_refused
from refimpl.http.context import Context

DEV_KEY = "dev"  # with --dev there are no tokens: every stream counts under this key


def request_credential(ctx: Context, ticket: str | None = None) -> Credential:
    streams = ctx.app.streams
    header = ctx.request.environ.get("HTTP_AUTHORIZATION")
    if ticket is not None and header is not None:
        raise BadRequest("send a ticket or an Authorization header, not both")
    if ctx.app.auth.dev:
        if ticket is not None:
            streams.tickets.redeem(ticket, ctx.database)  # once, as without --dev
        return Credential(DEV_KEY, ctx.principal, checked=False)
    if ticket is not None:
        try:
            return streams.credential_for_ticket(ticket, ctx.database)
        except Unauthorized as refused:
            log_refused(ctx.request, refused, "a stream ticket")
            raise
    if header is not None:
        # The app checked its form already: `Bearer <token>`.
        return streams.credential_for_token(header.strip().partition(" ")[2].strip())
    session_id = ctx.request.cookies.get(SESSION_COOKIE)
    if session_id:
        return streams.credential_for_session(session_id)
    raise Unauthorized(
        "the event stream needs a token, even where PUBLIC may read: send `Authorization:"
        " Bearer <token>`, the session cookie, or ?ticket= from POST /stream/tickets"
    )
