"""A request's WSGI environ: the keys its connection gives every request, then its own.

Keys as Werkzeug's development server sets them. `wire.RequestReader` reads the requests
whole; their environs are made here, one dict update each.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from refimpl.http.serving.wire import ReceivedRequest


def connection_environ(
    server_address: tuple[str, int], client_address: tuple[str, int]
) -> dict[str, Any]:
    """The keys of a WSGI environ that are the same for every request of one connection
    (`make_environ` copies them)."""
    return {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "SERVER_SOFTWARE": "refimpl",
        "SCRIPT_NAME": "",
        "REMOTE_ADDR": client_address[0],
        "REMOTE_PORT": client_address[1],
        "SERVER_NAME": server_address[0],
        "SERVER_PORT": str(server_address[1]),
    }


def make_environ(request: ReceivedRequest, base: dict[str, Any]) -> dict[str, Any]:
    """The WSGI environ of one request: `base` (its connection's `connection_environ`), the
    request's own keys and its header fields; its `wsgi.input` reads exactly this request's
    body.

    Keys as Werkzeug's development server sets them; PATH_INFO carries the percent-decoded
    path's bytes as latin-1 text, as PEP 3333 asks. The body was read whole (and de-chunked)
    already: CONTENT_LENGTH gives its length, and Transfer-Encoding is not passed on.
    """
    head = request.head
    target = head.target
    if target.startswith("/"):
        path, _, query = target.partition("?")
        path = path.partition("#")[0]
        host = None
    else:
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
        host = parts.netloc if parts.scheme and parts.netloc else None
    environ = {
        **base,
        **head.fields,
        "REQUEST_METHOD": head.method,
        "PATH_INFO": (
            unquote_to_bytes(path.encode("latin-1")).decode("latin-1") if "%" in path else path
        ),
        "QUERY_STRING": query,
        "REQUEST_URI": target,
        "RAW_URI": target,
        "SERVER_PROTOCOL": head.version,
        "wsgi.input": request.body,
    }
    if host is not None:
        environ["HTTP_HOST"] = host
    if request.has_body:
        environ["CONTENT_LENGTH"] = str(request.body_length)
    return environ
