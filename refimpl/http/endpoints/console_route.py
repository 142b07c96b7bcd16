"""The console page at `/` and its files under `/console/`, shipped inside the package.

The page holds no data: it is public, and reads everything through the API with the
caller's own rights (the session cookie it opens with a token, or `--dev`). Only the files
named in `CONSOLE_ASSETS` are routed, each by a route of its own, so no request path ever
reaches the file system. A strict Content-Security-Policy lets the page run only its own
scripts and styles and talk only to its own origin; it may not be framed.
"""

from __future__ import annotations

from pathlib import Path

from werkzeug.utils import send_file
from werkzeug.wrappers import Response

from refimpl.http.context import Context

CONSOLE_FOLDER = Path(__file__).resolve().parent.parent / "console"
CONSOLE_PREFIX = "/console/"
PAGE = "index.html"
CONSOLE_ASSETS = (
    "console.css",
    "api.js",
    "console.js",
    "sql.js",
    "statements.js",
    "results.js",
    "schema.js",
    "changes.js",
    "keys.js",
    "candles.js",
    "vendor/lightweight-charts.mjs",  # TradingView Lightweight Charts 5.3.0, see vendor/NOTICE
)

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
MEDIA_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
}  # UTF-8


def console_page(ctx: Context) -> Response:
    """GET /: the console page."""
    return _file(ctx, PAGE)


def console_asset(ctx: Context) -> Response:
    """GET /console/<name>: one of `CONSOLE_ASSETS` (the route table routes only those)."""
    return _file(ctx, ctx.request.path.removeprefix(CONSOLE_PREFIX))


def _file(ctx: Context, name: str) -> Response:
    path = CONSOLE_FOLDER / name
    # Revalidated on every load (ETag): a new version of the server is seen at once.
    response = send_file(
        path, ctx.request.environ, mimetype=MEDIA_TYPES[path.suffix], max_age=0, etag=True
    )
    response.headers.update(SECURITY_HEADERS)
    return response
