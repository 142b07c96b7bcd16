"""Checks every request passes before its route runs, so that no web page can act for a user.

A browser sends the session cookie with every request to our origin, whatever page made it,
and with `--dev` every request acts as the admin user: both are authority that comes with
the request rather than from its sender. So, before a route runs:

- `Host` must name this server (`allowed_hosts`; `*` for any): a page of another site that
  rebinds its DNS name to our address still sends its own name (DNS rebinding). HTTP/1.1
  requires the header; HTTP/1.0 may leave it out.
- A request let in by the cookie or by `--dev`, and one opening or ending a session, is
  refused (403) when the browser says another origin made it: `Origin`, without it
  `Referer`, and `Sec-Fetch-Site`. A bearer token is
  never sent by a browser on its own, so token clients are not asked where they come from.
- HEAD runs nothing: it is answered only by routes that read no data (`/health`, the
  OpenAPI document, static files); elsewhere it is a 405, never a statement run for nothing.
- A request naming a database needs a right in it (its own or PUBLIC's) before anything is
  looked up: a caller without any learns nothing about which databases or tables exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from werkzeug.exceptions import MethodNotAllowed

from refimpl.errors import BadRequest, Forbidden
from refimpl.http.auth import by_cookie

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY_HOST = "*"
# Sets and ends the cookie: a page of another site must not sign a browser in as someone
# (whose token it holds) without the user knowing, nor sign it out.
SESSION_PATH = "/api/session"
# What `Sec-Fetch-Site` says of a request another origin made (`same-site` is another port
# or subdomain of the same site: still another origin).
FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})
HOSTS_KEPT = 64  # `Host` values remembered as served


def host_name(authority: str) -> str:
    """The host of a `Host` value or URL authority, lowercase, without port or final dot."""
    text = authority.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[: end + 1] if end > 0 else text
    name, colon, port = text.rpartition(":")
    if colon and port.isdigit():
        text = name
    return text.rstrip(".")


def _normal(name: str) -> str:
    name = name.strip().lower()
    if ":" in name and not name.startswith("["):
        return f"[{name}]"  # a bare IPv6 address, as a Host header brackets it
    return name.rstrip(".")


class RequestGuards:
    """The checks of the module docstring, configured once per application."""

    def __init__(self, allowed_hosts: Iterable[str], dev: bool) -> None:
        names = {_normal(n) for n in allowed_hosts if n.strip()} or set(LOOPBACK_NAMES)
        self.any_host = ANY_HOST in names
        self.allowed_hosts = frozenset(names - {ANY_HOST})
        self.dev = dev
        # `Host` values found to name this server, exactly as sent: a client sends the same
        # one at every request. Only served ones are kept, at most HOSTS_KEPT of them.
        self._served: set[str] = set()

    def check_host(self, environ: Mapping[str, Any]) -> None:
        """400 unless the `Host` of a request (its WSGI environ) names this server."""
        host = environ.get("HTTP_HOST")
        if host in self._served:
            return
        if host is None or not host.strip():
            if environ.get("SERVER_PROTOCOL") == "HTTP/1.0":
                return
            raise BadRequest("an HTTP/1.1 request must send a Host header naming this server")
        if self.any_host or host_name(host) in self.allowed_hosts:
            if len(self._served) < HOSTS_KEPT:
                self._served.add(host)
            return
        served = ", ".join(sorted(self.allowed_hosts))
        raise BadRequest(
            f"this server does not serve the host '{host.strip()}' (it serves {served});"
            " send one of those, or add the name to the setting allowed_hosts"
        )

    def check_head(self, method: str, reads_no_data: bool, methods: Iterable[str]) -> None:
        """405 for HEAD (`method`, upper case) on a route that would run something to
        answer it."""
        if method == "HEAD" and not reads_no_data:
            raise MethodNotAllowed(valid_methods=[m for m in methods if m != "HEAD"])

    def check_origin(self, environ: Mapping[str, Any]) -> None:
        """403 for a request (its WSGI environ) that another origin made, when the cookie or
        --dev lets it in or it opens or ends a session."""
        signs_in = environ.get("PATH_INFO") == SESSION_PATH
        if not self.dev and not signs_in and not by_cookie(environ):
            return  # no authority comes with the request itself: nothing for a page to borrow
        foreign = self._foreign_origin(environ)
        if foreign is None:
            return
        if self.dev:
            reason = "with --dev every request acts as the admin user"
        elif signs_in:
            reason = "only this server's own pages may open or end its sessions"
        else:
            reason = "the session cookie would let it act for you"
        raise Forbidden(
            f"refused: a page of another origin ({foreign}) made this request, and {reason};"
            " use this server's own pages, or send a token in the Authorization header"
        )

    def _foreign_origin(self, environ: Mapping[str, Any]) -> str | None:
        """The other origin that made the request, as the browser names it, or None."""
        own = (environ.get("HTTP_HOST") or "").strip().lower()
        origin = environ.get("HTTP_ORIGIN")
        if origin is None:
            referer = environ.get("HTTP_REFERER")
            if referer:
                parts = urlsplit(referer)
                origin = f"{parts.scheme}://{parts.netloc}"
        if origin is not None:
            parts = urlsplit(origin.strip())
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != own:
                return origin.strip() or "null"
        site = environ.get("HTTP_SEC_FETCH_SITE", "").strip().lower()
        if site in FOREIGN_FETCH_SITES:
            return f"Sec-Fetch-Site: {site}"
        return None
