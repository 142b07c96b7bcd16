"""One log line and one count per request, and the request id that ties them together.

Every request gets an id: the client's own `X-Request-Id` when it is well-formed (1 to 64
letters, digits and `._:-`), else a new one. The answer carries it back in `X-Request-Id`, and
the request's log line (logger `refimpl.requests`, at INFO) names it, so a client's complaint
finds its line. A line is written when the answer is decided: at once for most requests, at
the end of its wait for a parked one (`RequestRecord.finish`, called by our server; under
another WSGI server, whose thread waits for a parked answer itself, such a request is neither
logged nor counted).

A log line never holds a secret: credentials travel in headers, which are not logged, and the
values of the query parameters `token` and `ticket` are replaced by `REDACTED`.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote_plus

REQUEST_ID_HEADER = "X-Request-Id"
RECORD_KEY = "refimpl.request"  # the environ key of a request's RequestRecord
UNMATCHED = "unmatched"  # the route label of a path no route has
SECRET_PARAMETERS = frozenset({"token", "ticket"})
MAX_QUERY_LOGGED = 512  # characters of the query string a line keeps

_WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

log = logging.getLogger("refimpl.requests")


def request_id(asked: str | None) -> str:
    """The client's id when it is well-formed, else a new random one."""
    if asked and _WELL_FORMED_ID.fullmatch(asked):
        return asked
    return secrets.token_hex(8)


def redacted_query(query: str) -> str:
    """The query string cut to a size, with the values of secret parameters replaced; the
    other parameters are kept as the client wrote them.

    The cut comes first, so a long query costs no more than a short one: what the cut drops
    is not logged at all, and a secret value the cut splits still follows its name.
    """
    cut = query[:MAX_QUERY_LOGGED]
    pieces = cut.split("&")
    for index, piece in enumerate(pieces):
        name = piece.partition("=")[0]
        if "%" in name or "+" in name:  # a name written with escapes could be a secret one
            name = unquote_plus(name)
        if name.lower() in SECRET_PARAMETERS:
            pieces[index] = f"{name}=REDACTED"
    text = "&".join(pieces)
    return text if len(query) <= MAX_QUERY_LOGGED else text + "..."


@dataclass(slots=True)
class RequestRecord:
    """One request from arrival to answer. `finish` logs and counts it, once."""

    request_id: str
    method: str
    path: str
    query: str
    client: str
    started: float
    _on_finish: Callable[[RequestRecord, int], None]
    route: str = UNMATCHED  # the matched route's path: a bounded label for metrics
    finished: bool = field(default=False)

    def finish(self, status: int) -> None:
        if self.finished:
            return
        self.finished = True
        self._on_finish(self, status)


ObserveRequest = Callable[[str, str, int, float], None]


class RequestLog:
    """Makes each request's record; at its finish, writes its line and counts it."""

    def __init__(self, observe: ObserveRequest) -> None:
        self._observe = observe

    def begin(self, environ: dict) -> RequestRecord:
        record = RequestRecord(
            request_id(environ.get("HTTP_X_REQUEST_ID")),
            environ.get("REQUEST_METHOD", ""),
            environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""),
            environ.get("REMOTE_ADDR", ""),
            time.perf_counter(),
            self._finished,
        )
        environ[RECORD_KEY] = record
        return record

    def _finished(self, record: RequestRecord, status: int) -> None:
        seconds = time.perf_counter() - record.started
        self._observe(record.route, record.method, status, seconds)
        if not log.isEnabledFor(logging.INFO):
            return
        query = redacted_query(record.query)
        target = f"{record.path}?{query}" if query else record.path
        log.info(
            "%s %s %d %.1f ms (request %s)", record.method, target, status, seconds * 1000,
            record.request_id,
            extra={"fields": {
                "request_id": record.request_id, "method": record.method, "path": record.path,
                "query": query, "route": record.route, "status": status,
                "duration_ms": round(seconds * 1000, 3), "client": record.client,
            }},
        )  # fmt: skip
