"""One request as a route handler sees it, and what the application lends the handlers.

Imports no other http module: `RouteServices` says, as a Protocol, what a handler may use of
the application, so that the endpoints and the app do not import each other.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from werkzeug.datastructures import FileStorage
from werkzeug.wrappers import Request, Response

from refimpl.engine.access import AccessControl, Principal
from refimpl.engine.event_streams import EventStreams
from refimpl.engine.features.live_queries import SubscriptionManager
from refimpl.engine.feeds import ChangeFeeds
from refimpl.engine.session import Session
from refimpl.engine.tracking.shared_results import SharedResults
from refimpl.errors import BadRequest
from refimpl.waiting.acknowledgements import acknowledge_when_durable
from refimpl.waiting.flusher import Flusher
from refimpl.waiting.parked import Parked
from refimpl.waiting.room import WaitingRoom

DEFAULT_DATABASE = "demo"

A = TypeVar("A")


class SessionDoor(Protocol):
    """Opens and closes browser sessions (POST and DELETE /api/session)."""

    dev: bool  # no authentication: every request acts as the admin user

    def open_session(self, request: Request, body: bytes) -> Response: ...

    def close_session(self, request: Request) -> Response: ...


class MetricsText(Protocol):
    """Renders the server's metrics (GET /metrics)."""

    def exposition(self, accept: str | None) -> tuple[bytes, str]: ...


class EngineSeam(Protocol):
    """What routes use of the engine's instance: sessions, the access rules and the live
    queries (the rest of it is the application's: databases, shutdown, statistics)."""

    @property
    def access(self) -> AccessControl: ...

    @property
    def subscriptions(self) -> SubscriptionManager: ...

    def session(
        self, database: str = ..., principal: Principal = ..., *, acknowledge_later: bool = False
    ) -> Session: ...


class RouteServices(Protocol):
    """What the application lends every route handler."""

    @property
    def instance(self) -> EngineSeam: ...

    feeds: ChangeFeeds
    waiting_room: WaitingRoom
    flusher: Flusher
    shared_answers: SharedResults
    wait_slots: threading.BoundedSemaphore
    auth: SessionDoor
    openapi_bytes: bytes
    streams: EventStreams
    metrics: MetricsText

    def read_body(self, request: Request) -> bytes: ...

    def read_environ_body(self, environ: dict[str, Any]) -> bytes: ...

    def read_form(self, request: Request) -> dict[str, str]: ...

    def read_files(self, request: Request) -> dict[str, FileStorage]: ...


@dataclass(slots=True)
class Context:
    """One request as the routes see it: checked parameters and who is asking.

    `environ` is the request's WSGI environ; `request`, Werkzeug's object over it, is made
    only when a route first asks for it (most answers need the environ alone).
    """

    app: RouteServices
    environ: dict[str, Any]
    args: dict[str, str]
    principal: Principal
    database: str  # db=, or DEFAULT_DATABASE
    method: str  # the request's method, upper case (as `request.method`)
    _request: Request | None = None

    @property
    def request(self) -> Request:
        """Werkzeug's request over `environ`, made at the first use."""
        request = self._request
        if request is None:
            request = self._request = Request(self.environ, populate_request=False)
        return request

    def session(
        self, principal: Principal | None = None, acknowledge_later: bool = False
    ) -> SessionScope:
        """An engine session for this request, for a `with` block; leaving the block closes
        it, which rolls back what was not committed.

        With `acknowledge_later`, its commits do not wait for their flush: the route answers
        through `when_durable`, and the waiting room sends the answer once it is durable.
        """
        return SessionScope(
            self.app.instance.session(
                self.database, principal or self.principal, acknowledge_later=acknowledge_later
            )
        )

    def when_durable(self, session: Session, answer: A) -> A | Parked[A]:
        """`answer` now, or parked until the session's commits are durable."""
        if not session.durable_needed:
            return answer
        return acknowledge_when_durable(
            self.app.waiting_room,
            self.app.flusher,
            session.database,
            session.durable_needed,
            answer,
        )

    def body(self) -> bytes:
        """The whole body (`BodyReader.read_body`: PayloadTooLarge past the limit)."""
        return self.app.read_environ_body(self.environ)

    def body_text(self) -> str:
        return decode_utf8(self.body())

    def require(self, name: str) -> str:
        value = self.args.get(name)
        if value is None or not value.strip():
            raise BadRequest(f"the parameter '{name}' is required")
        return value

    def whole(self, name: str, default: int | None, minimum: int = 0) -> int | None:
        """The whole-number parameter `name`; a clear 400 for anything else."""
        return parse_whole(self.args.get(name), name, default, minimum)


class SessionScope:
    """`Context.session`'s `with` block: the session, closed at the block's end however it
    ends (a class rather than a generator: it costs every request less)."""

    __slots__ = ("session",)

    def __init__(self, session: Session) -> None:
        self.session = session

    def __enter__(self) -> Session:
        return self.session

    def __exit__(self, *exc_info: object) -> None:
        self.session.close()


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the body is not valid UTF-8 (byte {exc.start + 1})") from None


MAX_WHOLE = 2**63 - 1  # positions and counts are 64-bit signed integers everywhere


def parse_whole(text: str | None, name: str, default: int | None, minimum: int = 0) -> int | None:
    """A whole-number parameter (or header) from `minimum` to MAX_WHOLE; a clear 400 else.

    ASCII digits only: `str.isdigit` also takes digits such as '²' that `int` refuses, and
    the length is bounded before converting, as `int` of thousands of digits is slow.
    """
    if text is None:
        return default
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or len(stripped) > len(str(MAX_WHOLE)):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadRequest(
            f"the parameter '{name}' must be a whole number from {minimum} to {MAX_WHOLE},"
            f" not '{shown}'"
        )
    number = int(stripped)
    if number < minimum or number > MAX_WHOLE:
        raise BadRequest(
            f"the parameter '{name}' must be from {minimum} to {MAX_WHOLE}, not {number}"
        )
    return number
