"""The WSGI application: routing, parameter checks, authentication, error answers.

Serving (sockets, threads, signals) is `server.py`'s job; this module only turns one
request into one response, so it can be tested with Werkzeug's test client as well.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.types import StartResponse, WSGIEnvironment

from werkzeug.exceptions import NotFound as WerkzeugNotFound
from werkzeug.routing import Map, Rule
from werkzeug.security import safe_join
from werkzeug.utils import send_from_directory
from werkzeug.wrappers import Request, Response

from refimpl.engine.access import Principal
from refimpl.engine.event_streams import EventStreams, StreamOptions
from refimpl.engine.feeds import ChangeFeeds
from refimpl.engine.instance import Instance
from refimpl.engine.tracking.shared_results import SharedResults
from refimpl.errors import BadRequest, NotFound, UnknownDatabase
from refimpl.http import routes
from refimpl.http.auth import Authenticator
from refimpl.http.context import DEFAULT_DATABASE, Context
from refimpl.http.encode import Answer
from refimpl.http.endpoints.stream_route import poke_streams
from refimpl.http.endpoints.stream_row_route import STREAM_LINKS
from refimpl.http.error_answers import to_response
from refimpl.http.metrics import ServerMetrics
from refimpl.http.request_guards import RequestGuards
from refimpl.http.request_input import BodyReader, query_args
from refimpl.http.request_log import REQUEST_ID_HEADER, RequestLog, RequestRecord
from refimpl.http.route_memo import MEMO_KEY, RouteMemo
from refimpl.waiting.flusher import Flusher
from refimpl.waiting.parked import Parked
from refimpl.waiting.room import WaitingRoom

OPENAPI_FILE = Path(__file__).with_name("openapi.json")
STATIC_PREFIX = "/static/"
READ_CHUNK = 1024 * 1024  # a body read buffers at most this much at once
SHARED_ANSWER_BYTES = 32 << 20  # what the shared change-stream pages may hold


@dataclass(frozen=True, slots=True)
class AppOptions:
    dev: bool = False
    threads: int = 16  # the server's worker threads: a quarter of them may wait for commits
    max_body_bytes: int = 64 * 1024 * 1024
    static: Path | None = None
    allowed_hosts: tuple[str, ...] = ()  # Host names served; empty: loopback names only
    behind_tls: bool = False  # the session cookie is then Secure
    streams: StreamOptions = StreamOptions()  # the event stream's settings


class App:
    """A WSGI callable over an engine `Instance`."""

    def __init__(self, instance: Instance, options: AppOptions | None = None) -> None:
        self.instance = instance
        self.options = options or AppOptions()
        # Waiting readers never take the threads /exec needs: at most a quarter may wait.
        self.wait_slots = threading.BoundedSemaphore(max(1, self.options.threads // 4))
        # The change stream's recent pages, `(answer, found)` pairs, kept for readers at the
        # same position: bounded in bytes too, since a catch-up page is megabytes.
        self.shared_answers = SharedResults(
            max_bytes=SHARED_ANSWER_BYTES, weigh=lambda kept: len(kept[0].body)
        )
        self.bodies = BodyReader(self.options.max_body_bytes)
        self.read_body = self.bodies.read_body
        self.read_environ_body = self.bodies.read_environ
        self.read_form = self.bodies.read_form
        self.read_files = self.bodies.read_files
        self.feeds = ChangeFeeds(instance)
        self.waiting_room = WaitingRoom(to_response)
        self.flusher = Flusher(self.waiting_room.wake)
        self.streams = EventStreams(
            instance, self.options.streams, poke_streams(self.waiting_room), links=STREAM_LINKS
        )
        self.metrics = ServerMetrics(instance.measures, self.waiting_room.parked_count)
        self.metrics.read_open_streams(self.streams.open_count)
        self.metrics.read_streams(self.streams.measures)
        self.request_log = RequestLog(self.metrics.observe_request)
        self.auth = Authenticator(instance.access, self.options.dev, self.options.behind_tls)
        self.guards = RequestGuards(self.options.allowed_hosts, self.options.dev)
        # Resolved once: a static file is served only when its real path lies in here.
        self.static_root = self.options.static.resolve() if self.options.static else None
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

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.answer(environ)(environ, start_response)

    def answer(self, environ: dict[str, Any]) -> routes.Handled:
        """The answer to one request (its WSGI environ) as the WSGI call makes it, without
        the call: our server sends an `Answer`'s bytes and parks a `Parked` itself, and
        calls any other answer (a Werkzeug `Response`) as WSGI. The Werkzeug `Request` over
        the environ is made only for the routes that ask for it. The request is logged and
        counted once answered (a parked one: by the server, once decided)."""
        record = self.request_log.begin(environ)
        try:
            response = self._dispatch(environ, record)
        except BaseException as exc:  # noqa: BLE001 - every failure must become a JSON answer
            self._discard_tickets(environ)
            if not isinstance(exc, Exception):
                raise
            response = to_response(exc)
        # The server's own handling time, so a client can tell it from the round trip (made
        # only for an answer given now: a write's, parked, is made by the flush).
        if isinstance(response, Answer):
            # `%` rather than an f-string's spec: a tenth fewer instructions in C.
            timing = "app;dur=%.3f" % ((time.perf_counter() - record.started) * 1000)
            response.headers += (("Server-Timing", timing), (REQUEST_ID_HEADER, record.request_id))
            record.finish(response.status_code)
        elif not isinstance(response, Parked):
            timing = f"app;dur={(time.perf_counter() - record.started) * 1000:.3f}"
            response.headers["Server-Timing"] = timing
            response.headers[REQUEST_ID_HEADER] = record.request_id
            record.finish(response.status_code)
        # A Parked one is decided later, by the waiting room: its time is mostly waiting. The
        # server sends its request id and finishes its record once it is answered.
        return response

    def _discard_tickets(self, environ: dict[str, Any]) -> None:
        """A ticket is used up by any connect that names it, also one refused before the
        route redeemed it (spec: stream, tickets)."""
        query = environ.get("QUERY_STRING", "")
        if "ticket" in query or "%" in query:  # a name may be written with escapes
            args = Request(environ, populate_request=False).args  # read as Werkzeug does
            if "ticket" in args:
                self.streams.tickets.discard(args.getlist("ticket"))

    def _dispatch(self, environ: dict[str, Any], record: RequestRecord) -> routes.Handled:
        memo: RouteMemo[routes.Route] | None = environ.get(MEMO_KEY)
        if memo is not None and memo.route is not None:
            # A repeat of the connection's last request but its id (route_memo): the checks
            # of its head passed for that request; who asks is checked again, as are their
            # rights in the database and whether it is there (`_run`).
            noted = memo.route
            record.route = noted.path
            principal = self.auth.principal(environ) if not noted.public else None
            args = memo.args_of(environ["QUERY_STRING"])
            return self._run(noted, environ, args, principal, memo.method)
        guards = self.guards
        guards.check_host(environ)  # first: a rebound name learns nothing, not even 404s
        asked = environ.get("REQUEST_METHOD")
        route = self._routes_seen.get((asked, environ.get("PATH_INFO")))
        if route is None:
            endpoint, values = self._match(environ)
            if not isinstance(endpoint, routes.Route):  # the map's other endpoint: "static"
                record.route = STATIC_PREFIX
                return self._static(Request(environ, populate_request=False), values["filename"])
            route = endpoint
        record.route = route.path
        method = "GET" if asked is None else asked.upper()  # as Werkzeug's `Request.method`
        # The public routes read no data: HEAD may ask them; elsewhere it would run a route.
        guards.check_head(method, route.public, route.methods)
        args = query_args(environ, route.repeatable)
        if not route.params.issuperset(args):  # in C, with no set made for a good request
            unknown = sorted(set(args) - route.params)
            names = ", ".join(f"'{n}'" for n in unknown)
            known = ", ".join(sorted(route.params))
            raise BadRequest(f"unknown query parameter(s) {names}; {route.path} takes {known}")
        principal = self.auth.principal(environ) if not route.public else None
        guards.check_origin(environ)  # the session routes too: a page must not sign you in
        if memo is not None:
            memo.note(route, method, args, environ["QUERY_STRING"])
        return self._run(route, environ, args, principal, method)

    def _run(
        self,
        route: routes.Route,
        environ: dict[str, Any],
        args: dict[str, str],
        principal: Principal | None,
        method: str,
    ) -> routes.Handled:
        """The route's answer, once the request's head passed its checks; rights in the
        database and its existence are checked here, every time."""
        database = args.get("db", DEFAULT_DATABASE)
        # None only on the public routes, which never read who is asking.
        context = Context(self, environ, args, principal, database, method)  # type: ignore[arg-type]
        if route.uses_database:
            # Rights before existence: without a right in it, a name's existence is not told.
            self.instance.access.check_any(context.principal, database)
            if not self.instance.has_database(database):
                raise UnknownDatabase(database)
        return route.handler(context)

    def begin_shutdown(self) -> None:
        """Answer every waiting request with what it has, now, and the engine's waiters."""
        self.streams.close()  # no new stream (503); the open ones end with the room's close
        self.waiting_room.close()
        self.flusher.close()
        self.instance.begin_shutdown()

    def _match(self, environ: dict[str, Any]) -> tuple[routes.Route | str, Mapping[str, Any]]:
        """The route of a request; NotFound or MethodNotAllowed (JSON via to_response).

        Routes without path variables are remembered by (method, path) in `_routes_seen`,
        which `_dispatch` looks in first: matching is then a dictionary lookup instead of
        Werkzeug's state machine. The map never changes and matches on neither host nor
        scheme, so the answer depends on these two alone.
        """
        key = (environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
        endpoint, values = self.url_map.bind_to_environ(environ).match()
        if not values and isinstance(endpoint, routes.Route):
            self._routes_seen[key] = endpoint
        return endpoint, values

    def _static(self, request: Request, filename: str) -> Response:
        """A file of the static folder; never one a symbolic link inside it points out to."""
        root = self.static_root
        assert root is not None
        joined = safe_join(str(root), filename)
        real = Path(os.path.realpath(joined)) if joined is not None else None
        if real is None or not real.is_relative_to(root) or not real.is_file():
            raise NotFound(f"no static file '{filename}'")
        try:
            return send_from_directory(root, str(real.relative_to(root)), request.environ)
        except WerkzeugNotFound:
            raise NotFound(f"no static file '{filename}'") from None
