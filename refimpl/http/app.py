"""The WSGI application: routing, parameter checks, authentication, error answers.

Serving (sockets, threads, signals) is `server.py`'s job; this module only turns one
request into one response, so it can be tested with Werkzeug's test client as well.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.datastructures import FileStorage
from werkzeug.exceptions import NotFound as WerkzeugNotFound
from werkzeug.routing import Map, Rule
from werkzeug.utils import send_from_directory
from werkzeug.wrappers import Request, Response

from refimpl.engine.shared_results import SharedResults
from refimpl.errors import BadRequest, NotFound, PayloadTooLarge, UnknownDatabase
from refimpl.http import routes
from refimpl.http.auth import Authenticator
from refimpl.http.deferred import Deferred, WaitingRoom
from refimpl.http.durability import Flusher
from refimpl.http.encode import Answer
from refimpl.http.errors import to_response

OPENAPI_FILE = Path(__file__).with_name("openapi.json")
STATIC_PREFIX = "/static/"
READ_CHUNK = 1024 * 1024  # a body read buffers at most this much at once


@dataclass(frozen=True, slots=True)
class AppOptions:
    dev: bool = False
    threads: int = 16  # the server's worker threads: a quarter of them may wait for commits
    max_body_bytes: int = 64 * 1024 * 1024
    static: Path | None = None


class App:
    """A WSGI callable over an engine `Instance` (anything with its interface)."""

    def __init__(self, instance: Any, options: AppOptions | None = None) -> None:
        self.instance = instance
        self.options = options or AppOptions()
        # Waiting readers never take the threads /exec needs: at most a quarter may wait.
        self.wait_slots = threading.BoundedSemaphore(max(1, self.options.threads // 4))
        self.shared_answers = SharedResults()
        self.waiting_room = WaitingRoom()
        self.flusher = Flusher(self.waiting_room.wake)
        self.auth = Authenticator(getattr(instance, "access", None), self.options.dev)
        # Read once: the document is served as is on every request.
        self.openapi_bytes = OPENAPI_FILE.read_bytes()
        json.loads(self.openapi_bytes)  # a broken checked-in document stops the start
        rules = [
            Rule(route.path, methods=route.methods, endpoint=route, strict_slashes=False)
            for route in routes.ROUTES
        ]
        if self.options.static is not None:
            rules.append(
                Rule(f"{STATIC_PREFIX}<path:filename>", methods=("GET",), endpoint="static")
            )
        self.url_map = Map(rules, merge_slashes=False)
        # Bounded: only paths that matched a route without variables are kept.
        self._routes_seen: dict[tuple[str | None, str | None], routes.Route] = {}

    # -- bodies ----------------------------------------------------------------------------

    def _limit(self, request: Request) -> None:
        request.max_content_length = self.options.max_body_bytes
        request.max_form_memory_size = self.options.max_body_bytes

    def read_body(self, request: Request) -> bytes:
        """The whole body, or PayloadTooLarge past `max_body_bytes` (chunked bodies too)."""
        cached = request.environ.get("kdb.body")
        if cached is not None:
            return cached
        limit = self.options.max_body_bytes
        declared = request.environ.get("CONTENT_LENGTH", "")
        length = int(declared) if declared.isascii() and declared.isdigit() else (
            request.content_length
        )
        if length is not None and length > limit:
            raise self._too_large()
        if "wsgi.input_terminated" in request.environ:
            # A chunked body: the server ends the stream, so read it ourselves up to one
            # byte past the limit (Werkzeug's own limit would cut it off silently).
            stream = request.environ["wsgi.input"]
            parts: list[bytes] = []
            size = 0
            while size <= limit:
                part = stream.read(min(65536, limit + 1 - size))
                if not part:
                    break
                parts.append(part)
                size += len(part)
            if size > limit:
                raise self._too_large()
            data = b"".join(parts)
        elif length is not None:
            # The input stream ends at the declared length; a read may return less.
            stream = request.environ["wsgi.input"]
            parts = []
            while length > 0:
                part = stream.read(min(length, READ_CHUNK))
                if not part:
                    break
                parts.append(part)
                length -= len(part)
            data = b"".join(parts)
        else:
            self._limit(request)
            data = request.get_data(cache=True)
        request.environ["kdb.body"] = data
        return data

    def _too_large(self) -> PayloadTooLarge:
        mb = self.options.max_body_bytes / (1024 * 1024)
        return PayloadTooLarge(
            f"the request body is larger than this server's limit of {mb:g} MB (max_body_mb)"
        )

    def read_form(self, request: Request) -> dict[str, str]:
        self._limit(request)
        form = request.form
        if request.files:
            raise BadRequest("send the SQL as a form field, not a file")
        return _single_values(form.lists(), "form field")

    def read_files(self, request: Request) -> dict[str, FileStorage]:
        self._limit(request)
        if request.form:
            raise BadRequest(f"unexpected form field(s): {', '.join(sorted(request.form))}")
        out: dict[str, FileStorage] = {}
        for name, items in request.files.lists():
            if len(items) != 1:
                raise BadRequest(f"the form file '{name}' is sent more than once")
            out[name] = items[0]
        return out

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: dict, start_response: Any) -> Iterable[bytes]:
        started = time.perf_counter()
        request = Request(environ, populate_request=False)  # no environ <-> request cycle
        try:
            response = self.dispatch(request)
        except BaseException as exc:  # noqa: BLE001 - every failure must become a JSON answer
            if not isinstance(exc, Exception):
                raise
            response = to_response(exc)
        # The server's own handling time, so a client can tell it from the round trip.
        timing = f"app;dur={(time.perf_counter() - started) * 1000:.3f}"
        if isinstance(response, Deferred):
            pass  # decided later, by the waiting room: its time is mostly waiting
        elif isinstance(response, Answer):
            response.headers.append(("Server-Timing", timing))
        else:
            response.headers["Server-Timing"] = timing
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response | Answer | Deferred:
        endpoint, values = self._match(request.environ)
        if endpoint == "static":
            return self._static(request, values["filename"])
        route: routes.Route = endpoint
        args = query_args(request, route.repeatable)
        unknown = sorted(set(args) - route.params)
        if unknown:
            names = ", ".join(f"'{n}'" for n in unknown)
            known = ", ".join(sorted(route.params))
            raise BadRequest(f"unknown query parameter(s) {names}; {route.path} takes {known}")
        principal = self.auth.principal(request) if not route.public else None
        context = routes.Context(self, request, args, principal)  # type: ignore[arg-type]
        if route.uses_database:
            self._require_database(context.database)
        return route.handler(context)

    def begin_shutdown(self) -> None:
        """Answer every waiting request with what it has, now, and the engine's waiters."""
        self.waiting_room.close()
        self.flusher.close()
        stopping = getattr(self.instance, "begin_shutdown", None)
        if stopping is not None:
            stopping()

    def _match(self, environ: dict) -> tuple[Any, dict[str, Any]]:
        """The route of a request; NotFound or MethodNotAllowed (JSON via to_response).

        Routes without path variables are remembered by (method, path): matching is then a
        dictionary lookup instead of Werkzeug's state machine. The map never changes and
        matches on neither host nor scheme, so the answer depends on these two alone.
        """
        key = (environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
        found = self._routes_seen.get(key)
        if found is not None:
            return found, {}
        endpoint, values = self.url_map.bind_to_environ(environ).match()
        if not values and isinstance(endpoint, routes.Route):
            self._routes_seen[key] = endpoint
        return endpoint, values

    def _require_database(self, name: str) -> None:
        if not self.instance.has_database(name):
            raise UnknownDatabase(name)

    def _static(self, request: Request, filename: str) -> Response:
        assert self.options.static is not None
        try:
            return send_from_directory(self.options.static, filename, request.environ)
        except WerkzeugNotFound:
            raise NotFound(f"no static file '{filename}'") from None


def query_args(request: Request, repeatable: frozenset[str] = frozenset()) -> dict[str, str]:
    """The query parameters, decoded strictly: bad UTF-8 and repeated names are refused.

    Werkzeug would replace undecodable bytes silently; SQL must never run altered.
    """
    raw = request.environ.get("QUERY_STRING", "")
    if not raw:
        return {}
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("the query string is not valid UTF-8") from None
    except ValueError as exc:
        raise BadRequest(f"the query string is malformed: {exc}") from None
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    # A repeatable parameter (symbol= of /api/rev) is read as a list by its route.
    for name in repeatable & grouped.keys():
        grouped[name] = grouped[name][-1:]
    return _single_values(grouped.items(), "query parameter")


def _single_values(items: Iterable[tuple[str, list[str]]], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, values in items:
        if len(values) != 1:
            raise BadRequest(f"the {what} '{name}' is given {len(values)} times; give it once")
        out[name] = values[0]
    return out
