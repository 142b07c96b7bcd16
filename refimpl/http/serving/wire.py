"""HTTP/1.1 on one connection: reading whole requests, writing answer heads.

No threads here and no WSGI application: `server.py` decides who reads which connection
and when; this module only turns bytes into `ReceivedRequest`s and environs, and an answer's
status and headers into bytes. The framing (request line, header fields, Content-Length,
chunked bodies) is llhttp's, Node.js's parser, through httptools: a hand-written parser is
where request smuggling lives (two lengths, a length beside chunked, a bad chunk size).

A request is read whole before it runs, without waiting: `RequestReader.receive` takes what
the client has sent and returns; the server waits for the rest in its epoll set, so a
client that trickles a head or a body holds no worker. A body stays in memory up to
MEMORY_BODY_BYTES and goes on in an unnamed temporary file past that, so that bodies
arriving on many connections at once cost bounded memory.
"""

from __future__ import annotations

import collections
import io
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import IO, TYPE_CHECKING

import httptools

from refimpl.errors import (
    MalformedRequest,
    RequestBodyTooLarge,
    RequestHeadTooLarge,
    RequestTargetTooLong,
)
from refimpl.http.request_log import REQUEST_ID_HEADER
from refimpl.http.serving.repeats import BodyRepeat, Repeat, repeat_of

if TYPE_CHECKING:
    from refimpl.http.encode import Answer

MAX_REQUEST_LINE = 65536
MAX_HEAD_BYTES = 256 * 1024
MAX_HEADERS = 100
RECV_BYTES = 65536
MEMORY_BODY_BYTES = 256 * 1024  # a body past this goes on in a temporary file
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

REASONS = {
    100: "Continue", 200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified",
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 410: "Gone", 413: "Content Too Large",
    414: "URI Too Long", 415: "Unsupported Media Type", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}  # fmt: skip

# The SERVER_PROTOCOL of the versions clients send.
_PROTOCOLS = {"1.1": "HTTP/1.1", "1.0": "HTTP/1.0"}

# llhttp's reasons for refusing framing, said as what to send instead.
_FRAMING = {
    "Duplicate Content-Length": "send Content-Length once",
    "Transfer-Encoding can't be present with Content-Length": (
        "send either Content-Length or Transfer-Encoding: chunked, not both"
    ),
    "Request has invalid `Transfer-Encoding`": (
        "the only Transfer-Encoding taken is chunked, and it must come last"
    ),
    "Invalid character in chunk size": "a chunk size must be hexadecimal digits",
    "Content-Length overflow": "the Content-Length is too large",
    "Invalid character in Content-Length": "the Content-Length must be decimal digits",
}


@dataclass(slots=True)
class RequestHead:
    """A request's line and header fields. `fields` holds the fields as the WSGI environ
    takes them (`environ_key`'s keys; a repeated name's values joined by commas, the last
    Content-Type alone), made as the head is read: the environ is then one dict update."""

    method: str
    target: str
    version: str
    fields: dict[str, str]
    keep_alive: bool

    def header(self, name: str) -> str:
        """The value of header `name` (any case) as the environ holds it, or ''."""
        return self.fields.get(environ_key(name.encode("latin-1")), "")


@dataclass(slots=True)
class ReceivedRequest:
    """A whole request: its head and its body (de-chunked), read to the end."""

    head: RequestHead
    body: IO[bytes]
    body_length: int
    has_body: bool  # it announced a body (Content-Length or chunked), maybe empty
    data: bytes | None = None  # what `body` reads, when held in memory (not in a file)

    def close(self) -> None:
        self.body.close()  # a temporary file goes away with it


class RequestReader:
    """Reads the requests of one connection without ever waiting for its client.

    The parser's callbacks (`on_url`, `on_header`, ...) collect each request; a whole one,
    or the error that ends the connection, joins `ready`, oldest first.
    """

    def __init__(self, sock: socket.socket, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.sock = sock
        self.max_body_bytes = max_body_bytes
        self.ready: collections.deque[ReceivedRequest | MalformedRequest | None] = (
            collections.deque()
        )  # None: the client closed, or no more can be read
        self.started_at: float | None = None  # when the unfinished request's first byte came
        self._parser = httptools.HttpRequestParser(self)
        self._ended = False
        self._in_head = False
        self._head_bytes = 0
        self._url: list[bytes] = []
        self._url_bytes = 0
        self._fields: dict[str, str] = {}  # the head's fields by environ key (RequestHead)
        self._room = MAX_HEADERS  # less the fields that added no key to `_fields`
        # The framing headers, noted as the head is read (one pass, no second scan).
        self._length = ""  # the first Content-Length
        self._codings: list[str] = []  # every Transfer-Encoding
        self._expect = ""  # the first Expect
        self._head: RequestHead | None = None
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._body_file: IO[bytes] | None = None
        self._has_body = False
        self._wants_continue = False
        # The last request, when it came alone in one receive with no body, and what its
        # repeats have in common with it (`take`).
        self.repeated: ReceivedRequest | None = None
        self._repeat: Repeat | BodyRepeat | None = None

    def receive(self) -> bool:
        """Read what the client has sent, without waiting; True when `next` has something.

        False means more bytes must come first: the server waits for them without a thread.
        """
        while not self.ready:
            if self._ended:
                self.ready.append(None)  # nothing more is read after the connection's end
                break
            try:
                data = self.sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                self._continue_if_asked()
                return False
            except OSError:
                data = b""
            if not data:
                self._end_of_stream()
            else:
                self.take(data)
        return True

    @property
    def repeats_body(self) -> bool:
        """True when `repeated`'s repeats come with another body, the same target."""
        return isinstance(self._repeat, BodyRepeat)

    def next(self) -> ReceivedRequest | MalformedRequest | None:
        """The oldest whole request, the error that ends the connection, or None (ended)."""
        return self.ready.popleft() if self.ready else None

    def take(self, data: bytes) -> None:
        """`feed` for what one receive gave: a repeat of the last request (`repeats`: its
        head again but the digits of its `id=` value, or another body) joins `ready` without
        the parser, as that request with its new target or body and the same head `fields`
        dict (a repeat's mark)."""
        # A repeat is known only at a message's start: any `feed` forgets it.
        repeat, last = self._repeat, self.repeated
        if last is not None and repeat is not None:
            if isinstance(repeat, BodyRepeat):
                body = repeat.body(data)
                if body is not None:  # the same head: shared, as its fields are
                    again = ReceivedRequest(last.head, io.BytesIO(body), len(body), True, body)
                    self.ready.append(again)
                    return
            elif (target := repeat.target(data)) is not None:
                h = last.head
                head = RequestHead(h.method, target, h.version, h.fields, True)
                self.ready.append(ReceivedRequest(head, io.BytesIO(), 0, last.has_body, b""))
                return
        fresh, count = self.started_at is None, len(self.ready)  # no message under way
        self.feed(data)
        self.repeated = self._repeat = None
        # One whole request begun at `data`'s first byte (not in an earlier receive), with
        # nothing after it: its head (and its body, by its Content-Length) is all of `data`.
        if fresh and len(self.ready) == count + 1 and self.started_at is None and not self._codings:
            made = self.ready[-1]
            if type(made) is ReceivedRequest and made.head.keep_alive:
                limit = min(self.max_body_bytes, MEMORY_BODY_BYTES)
                self._repeat = repeat_of(data, made.head, made.has_body, made.body_length, limit)
                self.repeated = made if self._repeat is not None else None

    def feed(self, data: bytes) -> None:
        """Parse `data`; whole requests and errors join `ready`."""
        if self._ended:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            cause = error.__context__
            self._fail(cause if isinstance(cause, MalformedRequest) else _parse_error(error))
            return
        except httptools.HttpParserUpgrade:
            # Upgrade and CONNECT are not served: the request is answered, then the
            # connection closes (what follows is not HTTP/1.1).
            if self.ready and isinstance(self.ready[-1], ReceivedRequest):
                self.ready[-1].head.keep_alive = False
            self._fail(None)
            return
        except httptools.HttpParserError as error:
            self._fail(_parse_error(error))
            return
        if self._in_head:
            # Counted per receive, so the limits hold however the head is cut into pieces.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(RequestHeadTooLarge("the request headers are larger than 256 KB"))

    # -- the parser's callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.started_at = time.monotonic()
        self._in_head, self._head_bytes = True, 0
        self._url, self._url_bytes, self._fields, self._room = [], 0, {}, MAX_HEADERS
        self._length, self._codings, self._expect = "", [], ""

    def on_url(self, url: bytes) -> None:
        self._url.append(url)
        self._url_bytes += len(url)
        if self._url_bytes > MAX_REQUEST_LINE:
            raise RequestTargetTooLong(
                f"the request target is longer than {MAX_REQUEST_LINE} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        # Most fields: an ordinary name sent before, once in this head. Every field either
        # adds a key to `fields` or takes one from `_room`, so the head has had
        # len(fields) + MAX_HEADERS - _room fields before this one.
        key = _plain_keys.get(name)
        fields = self._fields
        if key is not None and key not in fields and len(fields) < self._room:
            fields[key] = value.decode("latin-1")
            return
        if len(fields) >= self._room:
            raise RequestHeadTooLarge(f"more than {MAX_HEADERS} header fields")
        key = _environ_keys.get(name)
        if key is None:
            key = environ_key(name)
        text = value.decode("latin-1")
        if key in _FRAMING_KEYS:
            if key == _CONTENT_LENGTH:
                self._room -= 1
                self._length = self._length or text
                return  # the body is read whole: CONTENT_LENGTH is its length
            if key == _TRANSFER_ENCODING:
                self._room -= 1
                self._codings.append(text)
                return  # the body is de-chunked: not passed on
            self._expect = self._expect or text
        elif not key:
            self._room -= 1
            return  # a name with '_': it could pose as another once mapped
        if key in fields:
            self._room -= 1
            if key != "CONTENT_TYPE":  # the last Content-Type stands alone
                text = f"{fields[key]},{text}"
        fields[key] = text

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        version = parser.get_http_version()
        if version == "0.9":
            raise MalformedRequest("HTTP/0.9 requests are not served; send HTTP/1.1")
        if not version.startswith("1."):
            # 400 rather than 505: every answer to a client's mistake is a 4xx here.
            raise MalformedRequest(f"HTTP/{version} is not served here; send HTTP/1.1")
        head = RequestHead(
            parser.get_method().decode("latin-1"),
            b"".join(self._url).decode("latin-1"),
            _PROTOCOLS.get(version) or f"HTTP/{version}",
            self._fields,
            parser.should_keep_alive(),
        )
        declared = self._length
        codings = self._codings
        if codings and [c.strip().lower() for c in codings] != ["chunked"]:
            raise MalformedRequest(
                "the only Transfer-Encoding taken is chunked, alone; send the body as is"
                " with Content-Length, or chunked",
            )
        chunked = bool(codings)
        if declared and int(declared) > self.max_body_bytes:
            raise _too_large(self.max_body_bytes)
        self._head, self._has_body = head, chunked or bool(declared)
        self._body_bytes = 0  # `_body` is empty and `_body_file` None since the last message
        self._wants_continue = bool(
            self._expect
            and self._has_body
            and self._expect.lower() == "100-continue"
            and version == "1.1"
        )

    def on_body(self, data: bytes) -> None:
        self._body_bytes += len(data)
        if self._body_bytes > self.max_body_bytes:
            raise _too_large(self.max_body_bytes)  # a chunked body, as soon as it is past
        if self._body_file is not None:
            self._body_file.write(data)
            return
        self._body.append(data)
        if self._body_bytes > MEMORY_BODY_BYTES:
            self._body_file = tempfile.TemporaryFile()
            self._body_file.writelines(self._body)
            self._body = []

    def on_message_complete(self) -> None:
        head = self._head
        assert head is not None
        data: bytes | None = None
        if self._body_file is not None:
            body, self._body_file = self._body_file, None
            body.seek(0)
        else:
            data = b"".join(self._body)
            body = io.BytesIO(data)
        self._body = []
        self.ready.append(ReceivedRequest(head, body, self._body_bytes, self._has_body, data))
        self._head, self._wants_continue, self.started_at = None, False, None

    # -- ends ------------------------------------------------------------------------------

    def _continue_if_asked(self) -> None:
        """Tell a client waiting on `Expect: 100-continue` to send its body (once)."""
        if self._wants_continue and not self._ended:
            self._wants_continue = False
            try:
                self.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n", socket.MSG_DONTWAIT)
            except OSError:
                pass  # the client sends its body after a while anyway

    def _end_of_stream(self) -> None:
        if self.started_at is not None and not self._ended:
            self._fail(MalformedRequest("the connection ended inside a request"))
        else:
            self._fail(None)

    def _fail(self, error: MalformedRequest | None) -> None:
        """No more requests on this connection; `error` answers the unfinished one."""
        self._ended = True
        self.repeated = self._repeat = None
        if self._body_file is not None:
            self._body_file.close()
            self._body_file = None
        self._body = []
        self.started_at = None
        self.ready.append(error)
        if error is not None:
            self.ready.append(None)

    def close(self) -> None:
        """Let go of the bodies not served (their temporary files)."""
        self._fail(None)
        for item in self.ready:
            if isinstance(item, ReceivedRequest):
                item.close()
        self.ready.clear()


def _too_large(limit: int) -> RequestBodyTooLarge:
    return RequestBodyTooLarge(
        f"the request body is larger than this server's limit of"
        f" {limit / (1024 * 1024):g} MB (max_body_mb)",
    )


def _parse_error(error: Exception) -> MalformedRequest:
    reason = str(error.args[0] if error.args else error)
    advice = _FRAMING.get(reason)
    if advice is not None:
        return MalformedRequest(f"the request cannot be read: {reason}; {advice}")
    return MalformedRequest(f"the request is not valid HTTP/1.1: {reason}")


# A header's name, as sent -> its environ key ('' when it is not passed on): clients send
# the same few names again and again. Bounded, since the names are the client's to choose.
_environ_keys: dict[bytes, str] = {}
ENVIRON_KEYS_KEPT = 512
# Those of them whose field is passed on as it is (neither framing nor left out).
_plain_keys: dict[bytes, str] = {}
# The keys of the framing fields, which the reader notes as the head is read.
_CONTENT_LENGTH = "CONTENT_LENGTH"
_TRANSFER_ENCODING = "TRANSFER_ENCODING"
_FRAMING_KEYS = frozenset({_CONTENT_LENGTH, _TRANSFER_ENCODING, "HTTP_EXPECT"})


def environ_key(name: bytes) -> str:
    """The environ key of header `name` as PEP 3333 makes it; '' for a name with '_' (it
    could pose as another after the mapping). Content-Length and Transfer-Encoding get
    their own keys, which `RequestReader` notes and never passes on (the body is read whole
    already: the environ's CONTENT_LENGTH is its length)."""
    text = name.decode("latin-1")
    if "_" in text:
        key = ""
    else:
        key = text.upper().replace("-", "_")
        if key not in (_CONTENT_LENGTH, _TRANSFER_ENCODING, "CONTENT_TYPE"):
            key = "HTTP_" + key
    if len(_environ_keys) < ENVIRON_KEYS_KEPT:
        _environ_keys[name] = key
        if key and key not in _FRAMING_KEYS:
            _plain_keys[name] = key
    return key


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


def has_length(headers: list[tuple[str, str]]) -> bool:
    """True when `headers` hold a Content-Length (in any case)."""
    # Only a name of its length is lowered: most are not.
    return any(len(name) == 14 and name.lower() == "content-length" for name, _ in headers)


def answer_head(
    status: str,
    headers: list[tuple[str, str]],
    *,
    chunked: bool,
    keep_alive: bool,
    extra: tuple[str, str] | None = None,
) -> bytes:
    """The status line and header block of an answer, blank line included; the header
    `extra` (name, value), when given, last (after Connection, where `with_header` puts it).
    """
    return head_text(status, headers, chunked, keep_alive, extra, http_date()).encode("latin-1")


def head_text(
    status: str,
    headers: list[tuple[str, str]],
    chunked: bool,
    keep_alive: bool,
    extra: tuple[str, str] | None,
    date: str,
) -> str:
    """`answer_head`'s text, with `date` as the Date header's value (`heads` makes its
    templates with it)."""
    # Joined in C; exactly one Date, ours: the application's own are dropped, by a look at
    # each name only when a line of the joined text could be one (it begins "date: ").
    fields = "\r\n".join(map(": ".join, headers))
    if fields:
        lowered = fields.lower()
        if lowered.startswith("date: ") or "\ndate: " in lowered:
            fields = "\r\n".join(
                [f"{name}: {value}" for name, value in headers if name.lower() != "date"]
            )
        if fields:
            fields += "\r\n"
    end = _ENDS[chunked, keep_alive]
    more = "" if extra is None else f"{extra[0]}: {extra[1]}\r\n"
    return f"HTTP/1.1 {status}\r\n{fields}Date: {date}\r\n{end}{more}\r\n"


# The head's last lines (framing and keep-alive), by (chunked, keep_alive).
_ENDS = {
    (chunked, keep): ("Transfer-Encoding: chunked\r\n" if chunked else "")
    + ("Connection: keep-alive\r\n" if keep else "Connection: close\r\n")
    for chunked in (False, True)
    for keep in (False, True)
}


def whole_answer(answer: Answer, keep_alive: bool, with_body: bool) -> bytes:
    """The bytes of an `encode.Answer` sent whole: its head (and body, unless HEAD).

    Readers answered together share one Answer; its bytes are then made once (again only
    when the second of the Date header changes), not once per reader.
    """
    date = http_date()
    cached = answer.wire
    if cached is not None and cached[:3] == (date, keep_alive, with_body):
        return cached[3]
    data = answer_bytes(answer, keep_alive, with_body)
    answer.wire = (date, keep_alive, with_body, data)
    return data


def answer_bytes(
    answer: Answer, keep_alive: bool, with_body: bool, extra: tuple[str, str] | None = None
) -> bytes:
    """The bytes of an `encode.Answer` sent whole to one request: its head, with the header
    `extra` (name, value) last when given, and its body unless `with_body` is false (HEAD).
    `whole_answer` keeps these bytes on the answer for the readers that share it; this is
    for an answer that goes to one request alone. An Answer always carries its
    Content-Length, so it is never chunked."""
    head = answer_head_bytes(answer, keep_alive, with_body, extra)
    return head + answer.body if with_body else head


def answer_head_bytes(
    answer: Answer, keep_alive: bool, with_body: bool, extra: tuple[str, str] | None = None
) -> bytes:
    """The head `answer_bytes` puts before the body: a large body is sent after it as it
    is (`Connection`), not copied behind it."""
    headers = answer.headers
    if extra is None and len(headers) == 4 and with_body:
        # Most answers sent at once: an `Answer`'s two headers, then the app's two: their
        # head is a kept text with the values put in, the bytes `answer_head` makes without
        # its joins and its look for a Date among them.
        (kind, kind_value), length, timing, named = headers
        if (kind, length[0], timing[0], named[0]) == _SHAPED_NAMES:
            key = (answer.status, kind_value, keep_alive)
            text = _shaped_heads.get(key) or _shaped_head(*key)
            return (text % (length[1], timing[1], named[1], http_date())).encode("latin-1")
    return answer_head(answer.status, headers, chunked=False, keep_alive=keep_alive, extra=extra)


# The heads `answer_bytes` puts these headers' values in (a `%s` each, then the Date's), by
# status, content type and keep-alive; bounded, though the routes' few statuses fill it.
_SHAPED_NAMES = ("Content-Type", "Content-Length", "Server-Timing", REQUEST_ID_HEADER)
_shaped_heads: dict[tuple[str, str, bool], str] = {}


def _shaped_head(status: str, kind: str, keep_alive: bool) -> str:
    if len(_shaped_heads) >= 64:
        _shaped_heads.clear()
    fields = list(zip(_SHAPED_NAMES, (kind.replace("%", "%%"), "%s", "%s", "%s"), strict=True))
    text = head_text(status.replace("%", "%%"), fields, False, keep_alive, None, "%s")
    _shaped_heads[status, kind, keep_alive] = text
    return text


def chunk(answer: Answer) -> bytes:
    """The body of an `encode.Answer` that is one part of a streamed answer, as one chunk of
    the chunked transfer coding.

    Streams sent the same part share one Answer; its chunk is then made once, not once per
    stream.
    """
    cached = answer.wire_chunk
    if cached is not None:
        return cached
    data = b"%x\r\n%s\r\n" % (len(answer.body), answer.body)
    answer.wire_chunk = data
    return data


def with_header(data: bytes, name: str, value: str) -> bytes:
    """Answer bytes (`whole_answer`'s) with one more header line at the end of the head."""
    end = data.index(b"\r\n\r\n")
    return b"%s\r\n%s: %s%s" % (
        data[:end],
        name.encode("latin-1"),
        value.encode("latin-1"),
        data[end:],
    )


def error_answer(status: int, message: str, headers: Mapping[str, str] | None = None) -> bytes:
    """A whole JSON error answer for a request that could not be read; it closes.

    `headers`: more header fields (`{"Retry-After": "1"}`).
    """
    text = message.replace("\\", "\\\\").replace('"', "'")
    data = ('{"error": "' + text + '"}').encode("utf-8", "replace")
    more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    return (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{more}"
        f"Date: {http_date()}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1") + data
