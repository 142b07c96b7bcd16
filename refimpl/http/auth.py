"""Who a request acts as: a Bearer token, the browser session cookie, or anonymous.

A browser's `EventSource` cannot send an Authorization header, so a page posts its token to
`POST /api/session` once and is let in by an HttpOnly, SameSite=Strict cookie from then on:
script on the page cannot read it and other sites cannot make the browser send it.
With `--dev` there is no authentication: every request acts as the admin user.

Every refused login (a wrong, expired or revoked token, an ended session, a wrong ticket)
is a WARNING line of the server's log with the client's address (`log_refused`).

A keep-alive connection checks its bearer token once: the server lends each request its
connection's `ConnectionCredentials` (environ key `CREDENTIALS_KEY`), and a request whose
Authorization header is the very text the connection's last check was made for reuses that
check's principal while `AccessControl.still_valid` says nothing changed since (no user,
token or grant changed, the token not expired). Rights are checked at every request anyway.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from werkzeug.http import parse_cookie
from werkzeug.wrappers import Request, Response

from refimpl.engine.access import ADMIN, ANONYMOUS, AccessControl, Principal
from refimpl.engine.access.control import CheckedToken
from refimpl.errors import BadRequest, Unauthorized

SESSION_COOKIE = "kdb_session"
CREDENTIALS_KEY = "refimpl.credentials"  # the environ key of a ConnectionCredentials
log = logging.getLogger("refimpl.auth")


class ConnectionCredentials:
    """One connection's last good bearer check: the Authorization header's exact text and
    what it was found to stand for. Only the connection's own requests, one at a time, read
    and write it."""

    __slots__ = ("header", "checked")

    def __init__(self) -> None:
        self.header: str | None = None
        self.checked: CheckedToken | None = None


class Authenticator:
    def __init__(self, access: AccessControl | None, dev: bool, behind_tls: bool = False) -> None:
        if access is None and not dev:
            raise ValueError("authentication needs an AccessControl unless in dev mode")
        self.access = access
        self.dev = dev
        # Behind a TLS proxy the request reaching us is plain HTTP: the scheme cannot tell.
        self.behind_tls = behind_tls

    def principal(self, environ: Mapping[str, Any]) -> Principal:
        """The principal of a request (its WSGI environ), or Unauthorized for credentials
        that are sent but not valid.

        A wrong token is an error rather than anonymous access: silently dropping to fewer
        rights would hide the mistake behind a confusing 403 or an empty answer.
        """
        if self.dev:
            return ADMIN
        assert self.access is not None
        header = environ.get("HTTP_AUTHORIZATION")
        if header is not None:
            kept: ConnectionCredentials | None = environ.get(CREDENTIALS_KEY)
            if kept is not None and kept.header == header:
                checked = kept.checked
                if checked is not None and self.access.still_valid(checked):
                    return checked.principal
            try:
                scheme, _, token = header.strip().partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    raise Unauthorized("the Authorization header must be `Bearer <token>`")
                checked = self.access.check_token(token.strip())
            except Unauthorized as refused:
                if kept is not None:
                    kept.header = kept.checked = None
                log_refused(_request(environ), refused, "a bearer token")
                raise
            if kept is not None:
                kept.header, kept.checked = header, checked
            return checked.principal
        session_id = session_cookie(environ)
        if session_id:
            try:
                return self.access.principal_for_session(session_id)
            except Unauthorized as refused:
                log_refused(_request(environ), refused, "the session cookie")
                raise
        return ANONYMOUS

    def open_session(self, request: Request, body: bytes) -> Response:
        """POST /api/session: the body is the token, as text or JSON {"token": ...}."""
        token = _token_from_body(request, body)
        if self.dev:
            raise BadRequest("sessions are not needed with --dev: there is no authentication")
        assert self.access is not None
        try:
            principal = self.access.authenticate(token)
        except Unauthorized as refused:
            log_refused(request, refused, "a token to open a session")
            raise
        session_id, expires_at = self.access.open_session(token)
        expires = datetime.fromtimestamp(expires_at, UTC)
        response = Response(
            json.dumps({"user": principal.name, "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}),
            status=200,
            content_type="application/json",
        )
        response.set_cookie(
            SESSION_COOKIE,
            session_id,
            expires=expires,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self._secure(request),
        )
        return response

    def close_session(self, request: Request) -> Response:
        """DELETE /api/session: ends the session (if any) and clears the cookie."""
        session_id = request.cookies.get(SESSION_COOKIE)
        if session_id and self.access is not None:
            self.access.close_session(session_id)
        response = Response(status=204)
        response.delete_cookie(
            SESSION_COOKIE,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self._secure(request),
        )
        return response

    def _secure(self, request: Request) -> bool:
        """Whether the cookie goes out `Secure`: sent back over HTTPS only."""
        return self.behind_tls or request.scheme == "https"


def log_refused(request: Request, refused: Unauthorized, credential: str) -> None:
    """The log line of a refused login (logger `refimpl.auth`, WARNING): the client's
    address, the kind of credential, and the user when the credential named one; never the
    credential itself. In JSON its fields are `client`, `credential` and `user`."""
    client = request.environ.get("REMOTE_ADDR", "")
    user = refused.user
    whose = "" if user is None else f" (user '{user}')"
    log.warning(
        "refused login from %s with %s%s: %s",
        client,
        credential,
        whose,
        refused.message,
        extra={"fields": {"client": client, "credential": credential, "user": user}},
    )


def by_cookie(environ: Mapping[str, Any]) -> bool:
    """Whether a request (its WSGI environ) is let in by the session cookie (no
    Authorization header)."""
    return "HTTP_AUTHORIZATION" not in environ and bool(session_cookie(environ))


def session_cookie(environ: Mapping[str, Any]) -> str | None:
    """The session cookie a request (its WSGI environ) sends, as Werkzeug's
    `Request.cookies` reads it; None without one."""
    cookies = environ.get("HTTP_COOKIE")
    if not cookies:
        return None
    return parse_cookie(cookies).get(SESSION_COOKIE)


def _request(environ: Mapping[str, Any]) -> Request:
    """The Werkzeug request of an environ, for the rare paths that want one (a refusal)."""
    return Request(environ, populate_request=False)  # type: ignore[arg-type]


def _token_from_body(request: Request, body: bytes) -> str:
    try:
        text = body.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid UTF-8") from None
    if request.mimetype == "application/json" or text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            raise BadRequest('the body must be a token, or JSON {"token": "<token>"}') from None
        token = data.get("token") if isinstance(data, dict) else None
        if not isinstance(token, str):
            raise BadRequest('the JSON body must be {"token": "<token>"}')
        text = token.strip()
    if not text:
        raise BadRequest("send the token as the body to open a session")
    return text
