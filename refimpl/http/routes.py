"""The route table: every route with its methods, handler and the query parameters it takes.

An unknown parameter is refused before anything runs (`App.answer`). The handlers live in
`refimpl.http.endpoints`, one module per job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from werkzeug.wrappers import Response

from refimpl.engine.features.feed_options import OPTION_NAMES
from refimpl.http.context import Context
from refimpl.http.encode import Answer
from refimpl.http.endpoints.changes_route import changes_route
from refimpl.http.endpoints.console_route import (
    CONSOLE_ASSETS,
    CONSOLE_PREFIX,
    console_asset,
    console_page,
)
from refimpl.http.endpoints.ingest_routes import import_route, write_route
from refimpl.http.endpoints.metrics_route import metrics_route
from refimpl.http.endpoints.rev_route import rev_route
from refimpl.http.endpoints.service_routes import (
    health_route,
    openapi_route,
    session_close_route,
    session_open_route,
    stats_route,
)
from refimpl.http.endpoints.sql_routes import exec_route, export_route
from refimpl.http.endpoints.stream_route import stream_route
from refimpl.http.endpoints.stream_row_route import stream_row_route
from refimpl.http.endpoints.stream_tickets_route import stream_tickets_route
from refimpl.http.endpoints.subscribe_stream import subscribe
from refimpl.waiting.parked import Parked

# What a handler answers: a Werkzeug response, an encoded answer, or one parked until later.
Handled = Response | Answer | Parked[Answer]
Handler = Callable[[Context], Handled]


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    methods: tuple[str, ...]
    handler: Handler
    params: frozenset[str]
    public: bool = False  # answered without looking at credentials
    uses_database: bool = True  # db= must name an existing database
    repeatable: frozenset[str] = frozenset()  # parameters that may be given several times


def _route(
    path: str,
    methods: str,
    handler: Handler,
    params: str = "",
    *,
    public: bool = False,
    uses_database: bool = True,
) -> Route:
    every = frozenset(params.split()) | {"db"}
    return Route(path, tuple(methods.split()), handler, every, public, uses_database)


ROUTES: tuple[Route, ...] = (
    _route("/exec", "GET POST", exec_route, "query"),
    _route("/exp", "GET", export_route, "query"),
    _route("/imp", "POST", import_route, "table"),
    _route("/write", "POST", write_route, "precision"),
    _route("/api/stats", "GET", stats_route, uses_database=False),
    _route(
        "/api/changes",
        "GET",
        changes_route,
        " ".join(("table from limit wait format", *OPTION_NAMES)),
    ),
    Route(
        "/api/rev",
        ("GET",),
        rev_route,
        frozenset({"table", "symbol", "column", "db"}),
        repeatable=frozenset({"symbol"}),
    ),
    _route("/api/subscribe", "GET", subscribe, "query wait id offsets stream"),
    # The stream checks its database itself: a ?ticket= request comes without credentials.
    Route(
        "/stream/changes",
        ("GET",),
        stream_route,
        frozenset({"db", "table", "ticket", "last-event-id", "from", *OPTION_NAMES}),
        uses_database=False,
        repeatable=frozenset({"table"}),
    ),
    Route(
        "/stream/tickets",
        ("POST",),
        stream_tickets_route,
        frozenset({"db", "table"}),
        repeatable=frozenset({"table"}),
    ),
    _route("/stream/row", "GET", stream_row_route, "table key"),
    _route("/health", "GET", health_route, public=True, uses_database=False),
    _route("/metrics", "GET", metrics_route, uses_database=False),
    _route("/openapi.json", "GET", openapi_route, public=True, uses_database=False),
    _route("/api/session", "POST", session_open_route, public=True, uses_database=False),
    _route("/api/session", "DELETE", session_close_route, public=True, uses_database=False),
    _route("/", "GET", console_page, public=True, uses_database=False),
    *(
        _route(CONSOLE_PREFIX + name, "GET", console_asset, public=True, uses_database=False)
        for name in CONSOLE_ASSETS
    ),
)
