"""Checks made once before any example runs: is the target what the command line says?

A wrong URL, scheme, token or protocol address would otherwise fail every example in turn
with the same message. `preflight` asks the server four questions, in order, and stops at
the first wrong answer with one sentence that says what is wrong and how to fix it:

1. the URL is `http://` or `https://` with a host;
2. `GET /health` answers 200 (the server is up, on that scheme);
3. the token is valid (`POST /exec` does not answer 401) and an admin's (`SHOW USERS`, which
   only the admin may run, does not answer 403);
4. with `--pg HOST:PORT`, that address accepts a TCP connection.

Nothing here knows the implementation under test: HTTP through `requests`, a plain socket.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import requests

from conformance.pg_session import split_address

HEALTH_PATH = "/health"
ADMIN_PROBE = "SHOW USERS"  # the admin alone may list users (users-and-rights)


class PreflightError(Exception):
    """The target is not what the command line says; `message` says what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def preflight(
    base_url: str,
    token: str | None,
    *,
    admin_database: str = "demo",
    pg_address: str | None = None,
    timeout: float = 10.0,
) -> None:
    """Raise `PreflightError` at the first check the target fails; return when all pass."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PreflightError(
            f"--url {base_url!r} is not an http:// or https:// URL with a host;"
            " give the server's base URL, e.g. http://127.0.0.1:9000"
        )
    base = base_url.rstrip("/")
    with requests.Session() as http:
        _check_health(http, base, parts.scheme, timeout)
        _check_token(http, base, token, admin_database, timeout)
    if pg_address is not None:
        _check_pg(pg_address, timeout)


def _check_health(http: requests.Session, base: str, scheme: str, timeout: float) -> None:
    try:
        answer = http.get(base + HEALTH_PATH, timeout=timeout)
    except requests.exceptions.SSLError:
        raise PreflightError(
            f"{base} does not speak TLS; try http:// instead of https://"
        ) from None
    except requests.exceptions.ConnectionError as exc:
        hint = " (an https:// server answers plain HTTP badly: try https://)"
        raise PreflightError(
            f"cannot reach {base}: {_reason(exc)}; is the server running there?"
            + (hint if scheme == "http" and "reset" in str(exc).lower() else "")
        ) from None
    except requests.RequestException as exc:
        raise PreflightError(f"cannot reach {base}: {_reason(exc)}") from None
    if answer.status_code != 200:
        raise PreflightError(
            f"GET {base}{HEALTH_PATH} answered {answer.status_code}, not 200;"
            " is this the base URL of a server of the API?"
        )


def _check_token(
    http: requests.Session, base: str, token: str | None, database: str, timeout: float
) -> None:
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        answer = http.post(
            base + "/exec",
            params={"db": database},
            data=ADMIN_PROBE.encode(),
            headers=headers,
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise PreflightError(f"POST {base}/exec failed: {_reason(exc)}") from None
    if answer.status_code == 401:
        raise PreflightError(
            "the server refuses the token (401): pass the admin's token with --token"
            if token
            else "the server asks for a token (401): pass the admin's token with --token"
        )
    if answer.status_code == 403:
        raise PreflightError(
            "the token is valid but not the admin's (403 for SHOW USERS): the suite creates"
            " databases and users, so it needs the admin's token"
        )
    if answer.status_code >= 400:
        raise PreflightError(
            f"POST {base}/exec?db={database} with {ADMIN_PROBE!r} answered"
            f" {answer.status_code}: {answer.text[:200]}"
        )


def _check_pg(address: str, timeout: float) -> None:
    try:
        host, port = split_address(address)
    except ValueError as exc:
        raise PreflightError(f"--pg {exc}") from None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise PreflightError(
            f"nothing accepts connections at --pg {address}: {exc.strerror or exc};"
            " does the server serve the PostgreSQL protocol there (refimpl: --pg-port)?"
        ) from None


def _reason(exc: BaseException) -> str:
    """The innermost cause's words, without urllib3's nesting."""
    text = str(exc)
    for marker in ("Errno", "Connection refused", "Name or service not known"):
        at = text.find(marker)
        if at >= 0:
            return text[at:].rstrip(")'\"")
    return text[:200]
