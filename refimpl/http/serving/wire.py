"""HTTP/1.1 on one connection: reading request heads and bodies, writing answer heads.

No threads here and no WSGI application: `server.py` decides who reads which connection
and when; this module only turns bytes into a `RequestHead` and an environ, and an answer's
status and headers into bytes. It replaces `http.server`'s line-at-a-time reading (one
`readline` call per header, then `email.parser`) with one scan of a buffer that usually
holds the whole request after a single `recv`.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from werkzeug.serving import DechunkedInput
from werkzeug.wsgi import LimitedStream

MAX_REQUEST_LINE = 65536
MAX_HEAD_BYTES = 256 * 1024
MAX_HEADERS = 100
RECV_BYTES = 65536
PREREAD_BODY_BYTES = 1024 * 1024  # a body up to this size is buffered before the request runs

_CONTENT_LENGTH = re.compile(rb"\ncontent-length[ \t]*:[ \t]*(\d{1,18})[ \t]*\r?(?:\n|$)", re.I)
_EXPECT_CONTINUE = re.compile(rb"\nexpect[ \t]*:[ \t]*100-continue", re.I)

REASONS = {
    100: "Continue", 200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified",
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 410: "Gone", 413: "Content Too Large",
    414: "URI Too Long", 415: "Unsupported Media Type", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}  # fmt: skip


class MalformedRequest(Exception):
    """The request cannot be read; answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class RequestHead:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    keep_alive: bool

    def header(self, name: str) -> str:
        """The first value of header `name` (any case), or ''."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return ""


class SocketReader:
    """Buffered reads from a connected socket, with `buffered` known without a system call.

    File-like enough (`read`, `readline`, `readinto`) for a request body's stream.
    """

    def __init__(self, sock: socket.socket, on_block: Callable[[], None] = lambda: None) -> None:
        self.sock = sock
        self.buffer = b""
        self._on_block = on_block  # called before a read that has to wait for the client

    @property
    def buffered(self) -> int:
        return len(self.buffer)

    def _fill(self) -> bool:
        try:
            data = self.sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
        except BlockingIOError:
            self._on_block()
            data = self.sock.recv(RECV_BYTES)
        if not data:
            return False
        self.buffer += data
        return True

    def read_head(self) -> bytes | None:
        """The next request's head without its blank line; None at end of stream first.

        Blank lines before a request line are skipped, as RFC 9112 asks of a server.
        """
        while True:
            self.buffer = self.buffer.lstrip(b"\r\n")
            found = _head_end(self.buffer)
            if found is not None:
                end, blank = found
                head = self.buffer[:end]
                self.buffer = self.buffer[end + blank :]
                return head
            error = _oversized_head(self.buffer)
            if error is not None:
                raise error
            if not self._fill():
                if self.buffer:
                    raise MalformedRequest(400, "the connection ended inside a request head")
                return None

    def request_ready(self) -> bool:
        """Read what the client has sent, without waiting; True when a request can be served.

        That is: the buffer holds a whole request head and, when the head announces a body
        of at most PREREAD_BODY_BYTES by Content-Length (and does not ask for
        `100-continue`), that body too; or the client closed or failed, or what arrived can
        no longer become a valid head (reading the request then ends it at once). False
        means more bytes must come first: the server waits for them without a thread.
        """
        while not self.whole_request_buffered():
            try:
                data = self.sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not data:
                return True
            self.buffer += data
        return True

    def whole_request_buffered(self) -> bool:
        """True when the buffer alone makes `request_ready` true (no system call)."""
        buffer = self.buffer.lstrip(b"\r\n")
        if not buffer:
            return False
        found = _head_end(buffer)
        if found is None:
            return _oversized_head(buffer) is not None
        head_end = sum(found)
        head = buffer[:head_end]
        length = _CONTENT_LENGTH.search(head)
        if length is None or _EXPECT_CONTINUE.search(head):
            return True
        size = int(length.group(1))
        return size > PREREAD_BODY_BYTES or len(buffer) - head_end >= size

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            while self._fill():
                pass
            data, self.buffer = self.buffer, b""
            return data
        while len(self.buffer) < size and self._fill():
            pass
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def readinto(self, target: Any) -> int:
        """Up to len(target) bytes: what is buffered, else what one receive brings."""
        if not self.buffer and len(target):
            self._fill()
        data, self.buffer = self.buffer[: len(target)], self.buffer[len(target) :]
        target[: len(data)] = data
        return len(data)

    def readline(self, limit: int = -1) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0 and (limit < 0 or end < limit):
                size = end + 1
                break
            if 0 <= limit <= len(self.buffer):
                size = limit
                break
            if not self._fill():
                size = len(self.buffer)
                break
        line, self.buffer = self.buffer[:size], self.buffer[size:]
        return line


def _head_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the head at the start of `buffer` ends and how long its blank line is; None
    while it has not ended."""
    crlf, lf = buffer.find(b"\n\r\n"), buffer.find(b"\n\n")
    ends = [(at, blank) for at, blank in ((crlf, 3), (lf, 2)) if at >= 0]
    return min(ends) if ends else None


def _oversized_head(buffer: bytes) -> MalformedRequest | None:
    """The error for an unfinished head already too large ever to be read; else None."""
    first_line = buffer.find(b"\n")
    if (first_line < 0 and len(buffer) > MAX_REQUEST_LINE) or first_line > MAX_REQUEST_LINE:
        return MalformedRequest(414, "the request line is longer than 65536 bytes")
    if len(buffer) > MAX_HEAD_BYTES:
        return MalformedRequest(431, "the request headers are larger than 256 KB")
    return None


def parse_head(raw: bytes) -> RequestHead:
    """The request line and header fields of one head (as `read_head` returns it)."""
    lines = raw.decode("iso-8859-1").split("\n")
    request_line = lines[0].rstrip("\r")
    words = request_line.split()
    if len(words) != 3:
        raise MalformedRequest(400, f"bad request line {request_line[:100]!r}")
    method, target, version = words
    major, dot, minor = version.removeprefix("HTTP/").partition(".")
    if not version.startswith("HTTP/") or not dot or not (major + minor).isdigit():
        raise MalformedRequest(400, f"bad HTTP version {version[:20]!r}")
    if int(major) >= 2:
        raise MalformedRequest(505, f"HTTP version {version[:20]} is not supported")
    if len(lines) - 1 > MAX_HEADERS:
        raise MalformedRequest(431, "too many header lines")
    headers: list[tuple[str, str]] = []
    connection = ""
    for line in lines[1:]:
        text = line.rstrip("\r")
        if len(text) > MAX_REQUEST_LINE:
            raise MalformedRequest(431, "a header line is too long")
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise MalformedRequest(400, f"malformed header line {text[:100]!r}")
        value = value.strip()
        headers.append((name, value))
        if name.lower() == "connection":
            connection = value.lower()
    keep_alive = (int(major), int(minor)) >= (1, 1)
    if connection == "close":
        keep_alive = False
    elif connection == "keep-alive":
        keep_alive = True
    return RequestHead(method, target, version, headers, keep_alive)


def make_environ(
    head: RequestHead,
    reader: SocketReader,
    server_address: tuple[str, int],
    client_address: tuple[str, int],
) -> dict[str, Any]:
    """The WSGI environ of one request; its `wsgi.input` reads exactly this request's body.

    Keys as Werkzeug's development server sets them; PATH_INFO carries the percent-decoded
    path's bytes as latin-1 text, as PEP 3333 asks.
    """
    target = head.target
    if target.startswith("/"):
        path, _, query = target.partition("?")
        path = path.partition("#")[0]
        host = None
    else:
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
        host = parts.netloc if parts.scheme and parts.netloc else None
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "SERVER_SOFTWARE": "refimpl",
        "REQUEST_METHOD": head.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": (
            unquote_to_bytes(path.encode("latin-1")).decode("latin-1") if "%" in path else path
        ),
        "QUERY_STRING": query,
        "REQUEST_URI": target,
        "RAW_URI": target,
        "REMOTE_ADDR": client_address[0],
        "REMOTE_PORT": client_address[1],
        "SERVER_NAME": server_address[0],
        "SERVER_PORT": str(server_address[1]),
        "SERVER_PROTOCOL": head.version,
    }
    for name, value in head.headers:
        if "_" in name:
            continue  # a header with '_' could pose as another after the name mapping
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
            if key in environ:
                value = f"{environ[key]},{value}"
        environ[key] = value
    if host is not None:
        environ["HTTP_HOST"] = host
    encodings = environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    if "chunked" in (part.strip() for part in encodings.split(",")):
        environ["wsgi.input_terminated"] = True
        environ["wsgi.input"] = DechunkedInput(reader)  # type: ignore[arg-type]
    else:
        length = environ.get("CONTENT_LENGTH", "")
        if length and not (length.isascii() and length.isdigit() and len(length) <= 18):
            raise MalformedRequest(400, f"bad Content-Length {length[:30]!r}")
        environ["wsgi.input"] = LimitedStream(reader, int(length or 0))  # type: ignore[arg-type]
    return environ


_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """The Date header's value, formatted once a second."""
    global _date_cache
    now = int(time.time())
    second, text = _date_cache
    if second != now:
        text = formatdate(now, usegmt=True)
        _date_cache = (now, text)
    return text


def answer_head(status: str, headers: list[tuple[str, str]], *, chunked: bool,
                keep_alive: bool) -> bytes:
    """The status line and header block of an answer, blank line included."""
    lines = [f"HTTP/1.1 {status}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"Date: {http_date()}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    lines.append(f"Connection: {'keep-alive' if keep_alive else 'close'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def whole_answer(answer: Any, keep_alive: bool, with_body: bool) -> bytes:
    """The bytes of an `encode.Answer` sent whole: its head (and body, unless HEAD).

    Readers answered together share one Answer; its bytes are then made once (again only
    when the second of the Date header changes), not once per reader.
    """
    date = http_date()
    cached = answer.wire
    if cached is not None and cached[:3] == (date, keep_alive, with_body):
        return cached[3]
    data = answer_head(answer.status, answer.headers, chunked=False, keep_alive=keep_alive)
    if with_body:
        data += answer.body
    answer.wire = (date, keep_alive, with_body, data)
    return data


def error_answer(status: int, message: str) -> bytes:
    """A whole JSON error answer for a request that could not be read; it closes."""
    text = message.replace("\\", "\\\\").replace('"', "'")
    data = ('{"error": "' + text + '"}').encode("utf-8", "replace")
    return (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        f"Date: {http_date()}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1") + data
