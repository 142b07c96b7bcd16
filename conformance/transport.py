"""HTTP for the runner: one request of a step, sent in the foreground or in the background.

`HttpRequest` is a step's request made concrete (query parameters, headers, body); `send`
sends it through a `requests.Session` and reads the whole answer, or a streamed one up to
what the step's `read` says. `Background` sends one on its own connection and thread, so
that later steps run while it waits for its answer, and can be closed at any time. Nothing
here knows what a step expects of the answer.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from conformance.payloads import as_text, parse_frames, parse_sse

SSE_MEDIA_TYPE = "text/event-stream"
_CHUNK = 65536


class StepFailure(Exception):
    """A step whose answer (or lack of one) does not match; what a report shows of it."""

    def __init__(self, message: str, diff: str = "", request: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.diff = diff
        self.request = request


@dataclass
class Response:
    """An answer as the matchers see it. `content_type` is the media type, lower case."""

    status: int
    headers: dict[str, str]
    body: str
    content_type: str
    # (bytes read so far, seconds since the request was sent) after each read of a stream
    arrivals: tuple[tuple[int, float], ...] = ()

    def json(self) -> Any:
        """The body parsed as JSON, or the body text when it does not parse."""
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body

    def root(self) -> dict[str, Any]:
        """The object captures address: `$.status`, `$.headers.x`, `$.json...`, `$.sse[0]`."""
        root: dict[str, Any] = {
            "status": self.status,
            "headers": self.headers,
            "body": self.body,
            "json": self.json(),
        }
        if self.content_type == SSE_MEDIA_TYPE:
            root["sse"] = parse_sse(self.body)
        return root


@dataclass
class HttpRequest:
    """One request, ready to send. `data` is bytes or a form dict; `read` a step's `read`."""

    method: str
    path: str
    params: list[tuple[str, str]]
    headers: dict[str, str]
    data: Any = None
    json_body: Any = None
    read: dict[str, Any] | None = None
    shown_body: str = field(default="", repr=False)

    def describe(self) -> str:
        """The request as a report shows it, the credentials hidden."""
        query = "&".join(f"{k}={v}" for k, v in self.params)
        return describe_request(
            self.method, self.path + (f"?{query}" if query else ""), self.shown_body, self.headers
        )


def build_request(
    request: dict[str, Any], database: str, auth_headers: dict[str, str]
) -> HttpRequest:
    """The `HttpRequest` of a step's (substituted) request object, `db` added when absent."""
    params: list[tuple[str, str]] = []
    query = request.get("query", {})
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, list):
            params.extend((key, as_text(v)) for v in value)
        else:
            params.append((key, as_text(value)))
    if "db" not in query:
        params.append(("db", database))
    headers = {str(k): as_text(v) for k, v in request.get("headers", {}).items()}
    headers.update(auth_headers)
    built = HttpRequest(request["method"], request["path"], params, headers)
    built.read = request.get("read")
    if "body" in request:
        built.shown_body = as_text(request["body"])
        built.data = built.shown_body.encode("utf-8")
    elif "json" in request:
        built.json_body = request["json"]
        built.shown_body = json.dumps(built.json_body, ensure_ascii=False)
    elif "form" in request:
        built.data = {k: as_text(v) for k, v in request["form"].items()}
        built.shown_body = "&".join(f"{k}={v}" for k, v in built.data.items())
    return built


def describe_request(
    method: str, target: str, body: str = "", headers: dict[str, str] | None = None
) -> str:
    """`METHOD target`, the headers (Authorization hidden) and the body, as reports show it."""
    lines = [f"{method} {target}"]
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            value = value.split(" ", 1)[0] + " ***"
        lines.append(f"{name}: {value}")
    if body:
        shown = body if len(body) <= 2000 else body[:2000] + "..."
        lines.extend(["", shown])
    return "\n".join(lines)


def send(
    session: requests.Session, base_url: str, request: HttpRequest, timeout: float
) -> Response:
    """Send `request` and read its answer; raises StepFailure when no answer comes."""
    read = request.read
    read_timeout = float(read.get("timeout", timeout)) if read else timeout
    sent_at = time.monotonic()
    try:
        # A stream is read as it comes, undecoded: it is asked for as it is (a server may
        # compress what a client accepts compressed); an example's own header wins.
        headers = requests.structures.CaseInsensitiveDict({"Accept-Encoding": "identity"})
        headers.update(request.headers)
        response = session.request(
            request.method,
            base_url + request.path,
            params=request.params,
            headers=headers,
            data=request.data,
            json=request.json_body,
            timeout=(timeout, read_timeout),
            stream=True,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise StepFailure(f"HTTP request failed: {exc}", request=request.describe()) from None
    try:
        content_type = response.headers.get("Content-Type", "")
        media = content_type.split(";")[0].strip().lower()
        if media == SSE_MEDIA_TYPE or read:
            raw = response.raw
            reader = getattr(raw, "read1", None)
            # The read timeout of the request (the step's `timeout`) bounds each read here.
            chunk_of: Callable[[float], bytes] = (
                (lambda _left: reader(_CHUNK)) if reader else (lambda _left: raw.read(1))
            )
            body, arrivals = read_stream(chunk_of, read or {}, timeout, sent_at)
        else:
            body = response.content.decode(response.encoding or "utf-8", "replace")
            arrivals = ()
        return Response(
            status=response.status_code,
            headers={k.lower(): v for k, v in response.headers.items()},
            body=body,
            content_type=media,
            arrivals=arrivals,
        )
    except requests.RequestException as exc:
        raise StepFailure(f"the answer broke off: {exc}", request=request.describe()) from None
    finally:
        response.close()


def read_stream(
    read_chunk: Callable[[float], bytes],
    read: dict[str, Any],
    default_timeout: float,
    sent_at: float,
) -> tuple[str, tuple[tuple[int, float], ...]]:
    """Read a streamed body until it ends or the step's `read` is satisfied; the text and
    when each part of it came ((bytes so far, seconds since `sent_at`) after each read).

    `read` may say `events` (stop after that many server-sent events), `frames` (stop after
    that many blocks, comments alone included), `until` (stop after the first event of that
    name) and `timeout` (stop after that many seconds; a read that times out ends the
    reading as a closed stream would). `read_chunk(seconds_left)` gives the next bytes, b""
    at the end.
    """
    limit = read.get("events")
    frame_limit = read.get("frames")
    until = read.get("until")
    deadline = time.monotonic() + float(read.get("timeout", default_timeout))
    chunks: list[bytes] = []
    arrivals: list[tuple[int, float]] = []
    size = 0
    while time.monotonic() < deadline:
        try:
            chunk = read_chunk(deadline - time.monotonic())
        except Exception:  # a read timeout or a reset ends the reading, like a closed stream
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        arrivals.append((size, time.monotonic() - sent_at))
        if limit is not None or until is not None or frame_limit is not None:
            text = b"".join(chunks).decode("utf-8", "replace")
            if frame_limit is not None and len(parse_frames(text)) >= int(frame_limit):
                break
            events = parse_sse(text)
            if limit is not None and len(events) >= int(limit):
                break
            if until is not None and any(e.get("event") == until for e in events):
                break
    return b"".join(chunks).decode("utf-8", "replace"), tuple(arrivals)


class Background:
    """One request sent on a connection and thread of its own; later steps go on meanwhile.

    The request is prepared by the example's session (so its cookies go along; cookies its
    answer sets are not kept) and sent with `http.client`, whose socket `close` can shut
    from another thread: a request still waiting when its example ends is closed, not left
    running. `answer` and `error` are set once `done` is; `answered_at` is the
    `time.monotonic()` of the answer.
    """

    def __init__(
        self, session: requests.Session, base_url: str, request: HttpRequest, timeout: float
    ) -> None:
        prepared = session.prepare_request(
            requests.Request(
                request.method,
                base_url + request.path,
                params=request.params,
                headers=request.headers,
                data=request.data,
                json=request.json_body,
            )
        )
        self.request = request
        self.started_at = time.monotonic()
        self.answered_at: float | None = None
        self.answer: Response | None = None
        self.error = ""
        self.done = threading.Event()
        self._timeout = timeout
        self._closed = False
        url = urlsplit(prepared.url or "")
        if url.scheme == "https":
            self._connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                url.netloc, timeout=timeout
            )
        else:
            self._connection = http.client.HTTPConnection(url.netloc, timeout=timeout)
        try:
            self._connection.connect()
        except OSError as exc:
            raise StepFailure(
                f"HTTP request failed: cannot connect: {exc}", request=request.describe()
            ) from None
        target = url.path + (f"?{url.query}" if url.query else "")
        body = prepared.body.encode("utf-8") if isinstance(prepared.body, str) else prepared.body
        headers = dict(prepared.headers)
        # http.client does not decompress: ask for the body as it is.
        headers["Accept-Encoding"] = "identity"
        self._thread = threading.Thread(
            target=self._run,
            args=(prepared.method or "GET", target, body, headers),
            name="conformance-background",
            daemon=True,
        )
        self._thread.start()

    def _run(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> None:
        try:
            self._connection.request(method, target, body=body, headers=headers)
            response = self._connection.getresponse()
            media = response.getheader("Content-Type", "").split(";")[0].strip().lower()
            if media == SSE_MEDIA_TYPE or self.request.read:
                reader = self._chunk_reader(response)
                text, arrivals = read_stream(
                    reader, self.request.read or {}, self._timeout, self.started_at
                )
            else:
                text = response.read().decode("utf-8", "replace")
                arrivals = ()
            self.answer = Response(
                status=response.status,
                headers={k.lower(): v for k, v in response.getheaders()},
                body=text,
                content_type=media,
                arrivals=arrivals,
            )
        except (OSError, http.client.HTTPException) as exc:
            ended = "the example ended first" if self._closed else ""
            self.error = ended or f"{type(exc).__name__}: {exc}"
        finally:
            self.answered_at = time.monotonic()
            self.done.set()

    def _chunk_reader(self, response: http.client.HTTPResponse) -> Callable[[float], bytes]:
        def chunk(seconds_left: float) -> bytes:
            # A silent stream must not hold the reading past the step's own timeout.
            sock = self._connection.sock
            if sock is not None:
                sock.settimeout(max(0.001, min(seconds_left, self._timeout)))
            return response.read1(_CHUNK)

        return chunk

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` for the answer; True when it came (or the request failed)."""
        return self.done.wait(max(0.0, seconds))

    def close(self) -> None:
        """End the request: shut its socket (waking a waiting read) and join the thread."""
        self._closed = True
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the other side
        self._connection.close()
        self._thread.join(5.0)
