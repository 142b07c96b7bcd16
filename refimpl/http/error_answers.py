"""The one place where refimpl's exceptions become HTTP answers.

Every error answer is JSON `{"error": "<one sentence>"}`, plus the fields the exception's
`details()` gives (`position`, `gone_before`) and `statement` (1-based) when a statement of a
script failed. Anything that is not a KdbError is a bug: it is logged with its traceback and
answered as a 500 whose body says only that, never the traceback itself.
"""

from __future__ import annotations

import logging

from werkzeug.exceptions import HTTPException

from refimpl import errors
from refimpl.http.encode import Answer, json_response

log = logging.getLogger("refimpl.http")

RETRY_AFTER_SECONDS = 5

# Most specific first: the first class an exception is an instance of decides the status.
_STATUS: tuple[tuple[type[errors.KdbError], int], ...] = (
    (errors.PayloadTooLarge, 413),
    (errors.BadRequest, 400),
    (errors.SqlError, 400),
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.NotFound, 404),
    (errors.Gone, 410),
    (errors.TooManyRequests, 429),
    (errors.Unavailable, 503),
    (errors.ConfigError, 500),
    # A disk that failed a write, or damage met while serving: the change was not made.
    (errors.StorageError, 503),
)


def error_body(message: str, **extra: object) -> dict[str, object]:
    return {"error": message, **extra}


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    retry: bool = True,
    **extra: object,
) -> Answer:
    """`retry=False`: a 503 that waiting cannot mend, sent without `Retry-After`."""
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="kdb"'
    if status == 503 and retry:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return json_response(error_body(message, **extra), status, headers)


def status_of(exc: errors.KdbError) -> int:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def kdb_error_response(exc: errors.KdbError) -> Answer:
    status = status_of(exc)
    if status >= 500 and not isinstance(exc, errors.Unavailable):
        # Storage damage or a bad setting met while serving: not the client's fault.
        log.error("%s while serving a request: %s", type(exc).__name__, exc.message)
    extra = dict(exc.details())
    index = getattr(exc, "statement_index", None)
    if isinstance(index, int):
        extra["statement"] = index
    if isinstance(exc, errors.MemoryFull):
        # Waiting alone frees no memory: no Retry-After.
        return error_response(status, exc.message, retry=False, **extra)
    if isinstance(exc, errors.WritesStopped):
        # The log failed: no write succeeds again until a restart, so a retry cannot help.
        message = exc.message
        if "restart" not in message:
            message += "; the disk must be checked and the server restarted to write again"
        return error_response(status, message, retry=False, **extra)
    if isinstance(exc, errors.TooManyRequests):
        return error_response(status, exc.message, {"Retry-After": str(exc.retry_after)}, **extra)
    return error_response(status, exc.message, **extra)


def http_exception_response(exc: HTTPException) -> Answer:
    """Werkzeug's own errors (no route, wrong method, body too large) as JSON, not HTML."""
    status = exc.code or 500
    headers: dict[str, str] = {}
    if status == 404:
        message = "no such route; see /openapi.json for the routes this server has"
    elif status == 405:
        allowed = list(getattr(exc, "valid_methods", None) or [])
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
