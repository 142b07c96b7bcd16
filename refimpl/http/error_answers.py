"""The one place where refimpl's exceptions become HTTP answers.

Every error answer is JSON `{"error": "<one sentence>"}`, plus the fields the exception's
`details()` gives (`position`, `gone_before`) and `statement` (1-based) when a statement of a
script failed. Anything that is not a KdbError is a bug: it is logged with its traceback and
answered as a 500 whose body says only that, never the traceback itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from werkzeug.exceptions import HTTPException

from refimpl import errors
from refimpl.http.encode import Answer, json_response
from refimpl.http.serving import wire

log = logging.getLogger("refimpl.http")

# Most specific first: the first class an exception is an instance of decides the status.
STATUS: tuple[tuple[type[errors.KdbError], int], ...] = (
    (errors.RequestTargetTooLong, 414),
    (errors.RequestHeadTooLarge, 431),
    (errors.PayloadTooLarge, 413),  # a body past max_body_mb (RequestBodyTooLarge) too
    (errors.RequestTimeout, 408),
    (errors.BadRequest, 400),  # framing (MalformedRequest) and line protocol (LineError) too
    # Another transaction holds the database longer than lock_timeout: try again later.
    (errors.LockTimeout, 409),
    (errors.SqlError, 400),  # COPY's (CopyError) too
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.NotFound, 404),
    (errors.Gone, 410),
    (errors.TooManyRequests, 429),
    (errors.Unavailable, 503),  # a refused connection (TooManyConnections) too
    (errors.ConfigError, 500),
    # A disk that failed a write, or damage met while serving: the change was not made.
    (errors.StorageError, 503),
)

# The seconds a 503 tells its client to wait (Retry-After), most specific first; None: waiting
# cannot mend it, and no Retry-After is sent. Any other 503 says errors.RETRY_AFTER_SECONDS.
RETRY_AFTER: tuple[tuple[type[errors.KdbError], int | None], ...] = (
    # Refused before its request was read: a connection closes soon, so ask again soon.
    (errors.TooManyConnections, 1),
    (errors.MemoryFull, None),  # waiting alone frees no memory
    (errors.WritesStopped, None),  # no write succeeds again until a restart
)


def error_body(message: str, **extra: object) -> dict[str, object]:
    return {"error": message, **extra}


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    retry_after: int | None = errors.RETRY_AFTER_SECONDS,
    extra: Mapping[str, object] | None = None,
) -> Answer:
    """A JSON error answer; a 503 says `Retry-After: retry_after` unless that is None."""
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="kdb"'
    if status == 503 and retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return json_response(error_body(message, **(extra or {})), status, headers)


def status_of(exc: errors.KdbError) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def retry_after_of(exc: errors.KdbError) -> int | None:
    """The Retry-After seconds of `exc`'s answer if it is a 503 (None: no Retry-After)."""
    for cls, seconds in RETRY_AFTER:
        if isinstance(exc, cls):
            return seconds
    return errors.RETRY_AFTER_SECONDS


SUBSCRIBE_SERVED_AT = "GET /api/subscribe?query=SUBSCRIBE SELECT ..."
NOTIFICATIONS_INSTEAD = (
    "run it over the PostgreSQL protocol, or follow a table over HTTP with"
    " changes('t') or GET /api/changes"
)


def message_of(exc: errors.KdbError) -> str:
    # The engine's errors that name no route: worded here, as the spec gives the sentences.
    if isinstance(exc, errors.AnswersMoreThanOnce) and exc.served_at is None:
        return errors.AnswersMoreThanOnce("/exec", SUBSCRIBE_SERVED_AT).message
    if isinstance(exc, errors.NeedsNotifications) and exc.instead is None:
        return errors.NeedsNotifications(exc.statement, NOTIFICATIONS_INSTEAD).message
    if isinstance(exc, errors.NotASubscription):
        return errors.NotASubscription("/api/subscribe").message
    if isinstance(exc, errors.WritesStopped) and "restart" not in exc.message:
        # The log failed: no write succeeds again until a restart, so a retry cannot help.
        return exc.message + "; the disk must be checked and the server restarted to write again"
    return exc.message


def kdb_error_response(exc: errors.KdbError) -> Answer:
    status = status_of(exc)
    if status >= 500 and not isinstance(exc, errors.Unavailable):
        # Storage damage or a bad setting met while serving: not the client's fault.
        log.error("%s while serving a request: %s", type(exc).__name__, exc.message)
    extra = dict(exc.details())
    if exc.statement_index is not None:
        extra["statement"] = exc.statement_index
    headers = {}
    if isinstance(exc, errors.TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    return error_response(
        status, message_of(exc), headers, retry_after=retry_after_of(exc), extra=extra
    )


def closing_answer(exc: errors.KdbError) -> bytes:
    """The whole answer, as bytes, to a connection that ends before a request runs: a request
    that cannot be read or did not arrive in time, or a connection refused at a limit."""
    status = status_of(exc)
    retry_after = retry_after_of(exc) if status == 503 else None
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return wire.error_answer(status, message_of(exc), headers)


_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _method_rank(method: str) -> tuple[int, str]:
    """The usual order of HTTP methods (RFC 9110's), any other after them by name."""
    known = method in _METHOD_ORDER
    return (_METHOD_ORDER.index(method) if known else len(_METHOD_ORDER), method)


def http_exception_response(exc: HTTPException) -> Answer:
    """Werkzeug's own errors (no route, wrong method, body too large) as JSON, not HTML."""
    status = exc.code or 500
    headers: dict[str, str] = {}
    if status == 404:
        message = "no such route; see /openapi.json for the routes this server has"
    elif status == 405:
        # Werkzeug collects a route's methods in a set: ordered here, so that the message
        # and the Allow header read the same in every process.
        allowed = sorted(set(getattr(exc, "valid_methods", None) or ()), key=_method_rank)
        message = f"method not allowed here; use {' or '.join(allowed) or 'another method'}"
        if allowed:
            headers["Allow"] = ", ".join(allowed)
    elif status == 413:
        message = "the request body is too large"
    else:
        message = (exc.description or exc.name or "bad request").strip().rstrip(".")
    return error_response(status, message, headers)


def unexpected_response(exc: BaseException) -> Answer:
    log.error("bug: unexpected %s while serving a request", type(exc).__name__, exc_info=exc)
    return error_response(
        500, "internal error (a bug in the server); the server log has the details"
    )


def to_response(exc: BaseException) -> Answer:
    if isinstance(exc, errors.KdbError):
        return kdb_error_response(exc)
    if isinstance(exc, HTTPException):
        return http_exception_response(exc)
    return unexpected_response(exc)
