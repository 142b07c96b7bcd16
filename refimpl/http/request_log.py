"""One log line and one count per request, and the request id that ties them together.

Every request gets an id: the client's own `X-Request-Id` when it is well-formed (1 to 64
letters, digits and `._:-`), else a new one. The answer carries it back in `X-Request-Id`, and
the request's log line (logger `refimpl.requests`, at INFO) names it, so a client's complaint
finds its line. A line is written when the answer is decided: at once for most requests, at
the end of its wait for a parked one (`RequestRecord.finish`, called by our server; under
another WSGI server, whose thread waits for a parked answer itself, such a request is neither
logged nor counted).

A log line never holds a secret: credentials travel in headers, which are not logged, the
values of the query parameters `token` and `ticket` are replaced by `REDACTED`, and so is,
in any other parameter's value (SQL in `query=`, say) and in the path, a token or ticket
(`kdb_...`, `kdbt_...`) and the text of `TOKEN '...'` (`DROP TOKEN '<token>'`).

A line is one line whatever the client sent: the path is shown as the UTF-8 text it names
(percent escapes decoded by the server), so its control characters, and any in the query
or the method, are escaped (`refimpl.log_format.escape_controls`) in both log formats.

At its answer a request makes only a `RequestLine`, a tuple of plain fields; the line's text
(redaction included) and its `logging.LogRecord` are made by whoever writes it: at once by
default, or by the server's log thread once `write_lines_to` hands the lines to it
(`refimpl.http.serving.log_queue`), so a request's thread spends no time on its line.
"""

from __future__ import annotations

import functools
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import quote_plus, unquote_plus

from refimpl.log_format import TextLineFormatter
from refimpl.log_format import escape_controls as _escape_all

REQUEST_ID_HEADER = "X-Request-Id"
RECORD_KEY = "refimpl.request"  # the environ key of a request's RequestRecord
UNMATCHED = "unmatched"  # the route label of a path no route has
SECRET_PARAMETERS = frozenset({"token", "ticket"})
MAX_QUERY_LOGGED = 512  # characters of the query string a line keeps

_WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

log = logging.getLogger("refimpl.requests")


class RequestIds:
    """Request ids: the client's own when it is well-formed, else a new random one.

    An id is not a secret (the answer and the log line show it), so a new one comes from a
    generator seeded once from the system's randomness, not from a system call per request
    (`secrets` cost a request as much as its whole log line).
    """

    def __init__(self) -> None:
        self._random = random.Random()  # seeded from os.urandom

    def __call__(self, asked: str | None) -> str:
        """`asked` when it is well-formed, else 16 new hexadecimal digits."""
        if asked and _WELL_FORMED_ID.fullmatch(asked):
            return asked
        # The same digits as f"{bits:016x}", without the format machinery's parse of the
        # spec: two C calls, half the instructions.
        return self._random.getrandbits(64).to_bytes(8, "big").hex()


def escape_controls(text: str) -> str:
    """`refimpl.log_format.escape_controls`, at the cost of one C scan for the text of
    almost every line: every character it escapes is one `str.isprintable` refuses."""
    return text if text.isprintable() else _escape_all(text)


def redacted_query(query: str) -> str:
    """The query string cut to a size, with the values of secret parameters replaced, and
    the secrets inside other values (`redacted_text`); the other parameters are kept as the
    client wrote them (a value with a secret in it is shown percent-encoded again).

    The cut comes first, so a long query costs no more than a short one: what the cut drops
    is not logged at all, and a secret value the cut splits still follows its name.
    """
    if not query:
        return query  # most requests: /exec's SQL comes as the body
    cut = query[:MAX_QUERY_LOGGED]
    lowered = cut.lower()
    if (
        "%" not in cut
        and "+" not in cut
        # What a query must hold, lower-cased, for anything in it to be redacted: a secret
        # parameter's name (SECRET_PARAMETERS), a token or ticket, or `TOKEN '...'`. Each
        # word looked for by itself: a generator over them cost more than the searches.
        and "kdb" not in lowered
        and "token" not in lowered
        and "ticket" not in lowered
    ):
        # The common query: nothing escaped, so no name or value can spell a secret one.
        text = escape_controls(cut)
        return text if len(query) <= MAX_QUERY_LOGGED else text + "..."
    pieces = cut.split("&")
    last = len(pieces) - 1 if len(query) > MAX_QUERY_LOGGED else -1  # the piece cut short
    text = escape_controls("&".join(_shown_piece(p, i == last) for i, p in enumerate(pieces)))
    return text if len(query) <= MAX_QUERY_LOGGED else text + "..."


@functools.lru_cache(maxsize=1024)
def _shown_piece(piece: str, cut_short: bool) -> str:
    """One `name=value` piece of a query string as its line shows it: remembered, since a
    long poll sends the same `query=` again and again, and decoding its percent escapes is
    Python's work at every character (as many pieces are remembered as `request_input`'s
    decoder remembers: at most MAX_QUERY_LOGGED characters each)."""
    name, _, value = piece.partition("=")
    if "%" in name or "+" in name:  # a name written with escapes could be a secret one
        name = unquote_plus(name)
    if name.lower() in SECRET_PARAMETERS:
        return f"{name}=REDACTED"
    decoded = unquote_plus(value) if "%" in value or "+" in value else value
    hidden = redacted_text(decoded, cut_short=cut_short)
    return piece if hidden == decoded else f"{name}={quote_plus(hidden, safe=_SHOWN)}"


# A token or ticket anywhere (20 characters of it or more), and the string after TOKEN
# (`DROP TOKEN '<token>'`, whatever it holds, also when the text ends inside it).
_SECRET = re.compile(
    r"kdbt?_[A-Za-z0-9_-]{20,}|(?<=TOKEN)(\s*)'(?:[^']|'')*(?:'|\Z)", re.IGNORECASE
)
_CUT_TOKEN = re.compile(r"kdbt?_[A-Za-z0-9_-]*\Z", re.IGNORECASE)  # what a cut left of one
_SHOWN = "'(),*;:/"  # left as they are in a value shown again: SQL stays readable


def redacted_text(text: str, *, cut_short: bool = False) -> str:
    """`text` with every token, ticket and `TOKEN '...'` string replaced by `REDACTED`;
    `cut_short`: the text was cut, and the start of a token at its end goes too."""
    if "kdb" not in text.lower() and "token" not in text.lower():
        return text  # the common case, without a regular expression's scan
    hidden = _SECRET.sub(
        lambda m: f"{m.group(1)}'REDACTED'" if m.group(1) is not None else "REDACTED", text
    )
    return _CUT_TOKEN.sub("REDACTED", hidden) if cut_short else hidden


def shown_path(path: str) -> str:
    """A WSGI path (its bytes as Latin-1) as the UTF-8 text it names, secrets redacted and
    control characters escaped."""
    shown = _shown_paths.get(path)
    if shown is not None:
        return shown
    shown = _shown_path(path)
    if len(path) <= SHOWN_PATH_KEPT and len(_shown_paths) < SHOWN_PATHS_KEPT:
        _shown_paths[path] = shown
    return shown


# The paths shown already: clients ask the same few routes again and again. Bounded, since
# the paths are the clients' to choose; a path is shown the same way every time.
_shown_paths: dict[str, str] = {}
SHOWN_PATHS_KEPT = 256
SHOWN_PATH_KEPT = 200  # characters of a path kept at most


def _shown_path(path: str) -> str:
    try:
        text = path.encode("latin-1").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # not a WSGI string: shown as it is
        text = path
    return escape_controls(redacted_text(text))


_MESSAGE = "%s %s %d %.1f ms (request %s)"  # a request line's message and its arguments
# The digits of an `id=` value of a query string that are all that change from one long
# poll's request to its next (a subscription's name, a dot and a version; or digits): a
# piece of the query whose value is letters and digits with a dot, which no redaction
# touches (no escape, no underscore, no quote), so the line shows the piece as it is.
# Matched at each `id=` that `str.find` finds (`_id_digits`): a search of the pattern with
# `(?:^|&)` before it has no literal to skip by and tries every character of the query,
# about 50,000 instructions (4 us) for a long poll's query of some 330 characters.
_ID_DIGITS = re.compile(r"id=(?:[0-9A-Za-z]{1,64}\.)?([0-9]{1,20})(?=&|\Z)")
LINE_SHAPES_KEPT = 1024


def _id_digits(query: str) -> re.Match[str] | None:
    """The first `id=` parameter of `query` (at its start or after a `&`) whose value is
    `_ID_DIGITS`'s, its digits group 1; what `re.search(r"(?:^|&)" + _ID_DIGITS.pattern,
    query)` finds."""
    at = query.find("id=")
    while at >= 0:
        if at == 0 or query[at - 1] == "&":
            found = _ID_DIGITS.match(query, at)
            if found is not None:
                return found
        at = query.find("id=", at + 1)
    return None


class LineShapes:
    """The lines' shapes shown so far, by (method, path, the query before an id's digits,
    after them): a line's text before those digits (method and target) and after them.
    Bounded, since the queries are the clients'; used by one writer at a time."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self.get = self._shapes.get

    def keep(self, key: tuple[str, str, str, str], text: str, digits: str) -> None:
        """Keep the shape of the lines of `key` (`_ID_DIGITS` found `digits` between its
        two parts of the query) from one of them, whose method and target are `text`."""
        tail = _shown_pieces(key[3])
        # Each piece is shown by itself and the id's as it is, so `text` always ends so;
        # checked all the same, since a line's bytes are what its readers rely on.
        if text.endswith(digits + tail):
            if len(self._shapes) >= LINE_SHAPES_KEPT:
                self._shapes.clear()
            self._shapes[key] = (text[: len(text) - len(digits) - len(tail)], tail)


def _shown_pieces(part: str) -> str:
    """A part of a query string, cut at `&`s, as `redacted_query` shows those pieces of a
    query no longer than MAX_QUERY_LOGGED."""
    return escape_controls("&".join(_shown_piece(p, False) for p in part.split("&")))


class RequestLine(NamedTuple):
    """One request's log line as plain fields, made at its answer; `record` makes its text."""

    created: float  # time.time() at the answer: the line's time, whenever it is written
    method: str
    path: str
    query: str  # as the client sent it: `record` redacts it
    route: str
    status: int
    seconds: float
    request_id: str
    client: str
    # Where `text_line` keeps the shapes of lines shown already (`LineShapes`); None: none.
    shapes: LineShapes | None = None

    def text_line(self, formatter: TextLineFormatter) -> str | None:
        """`formatter.format(self.record())`, made without the record (the writer's common
        case: a text line costs a third of that); None when the formatter needs the record
        (`TextLineFormatter.info_start`)."""
        start_text = formatter.info_start(self.created)
        if start_text is None:
            return None
        # The line is made of its parts escaped one by one (escaping a text escapes each
        # of its characters alone), never scanned again whole: a long poll's 300
        # characters cost `str.isprintable` about 10,000 instructions. In one f-string,
        # as `_MESSAGE` shows them: one text made, not a message and then its line (the
        # status an int, whose text is its "%d").
        request_id = self.request_id
        if not request_id.isprintable():  # `RequestIds` makes only printable ones
            request_id = _escape_all(request_id)
        query = self.query
        shapes = self.shapes
        found = None
        if query and shapes is not None and len(query) <= MAX_QUERY_LOGGED:
            # A long poll asks again with the same query but its id's digits: its line is
            # the last one's shape with those digits and its own figures put in.
            found = _id_digits(query)
            if found is not None:
                start, end = found.span(1)
                key = (self.method, self.path, query[:start], query[end:])
                shape = shapes.get(key)
                if shape is not None:
                    return (
                        f"{start_text}{shape[0]}{query[start:end]}{shape[1]} {self.status}"
                        f" {self.seconds * 1000:.1f} ms (request {request_id})"
                    )
        # As `record` makes them, with the calls most lines need no answer from left out.
        method = self.method
        if not method.isprintable():
            method = _escape_all(method)
        target = shown_path(self.path)
        if query:
            target = f"{target}?{redacted_query(query)}"
        if found is not None and shapes is not None:  # the next lines of its shape: from it
            shapes.keep(key, f"{method} {target}", query[start:end])
        return (
            f"{start_text}{method} {target} {self.status}"
            f" {self.seconds * 1000:.1f} ms (request {request_id})"
        )

    def record(self) -> logging.LogRecord:
        """The line as the `refimpl.requests` logger's INFO record, secrets redacted."""
        query = redacted_query(self.query)
        path = shown_path(self.path)
        method = escape_controls(self.method)
        target = f"{path}?{query}" if query else path
        milliseconds = self.seconds * 1000
        created = self.created
        # A copy of one record's attributes with the line's own: what makeLogRecord makes,
        # without LogRecord.__init__'s lookups (thread, process, file name) that no format
        # shows and that were the writer thread's, not the request's, anyway.
        record = logging.LogRecord.__new__(logging.LogRecord)
        record.__dict__ = {
            **_RECORD_TEMPLATE,
            "args": (method, target, self.status, milliseconds, self.request_id),
            "created": created,
            "msecs": int((created - int(created)) * 1000) + 0.0,
            "relativeCreated": (created - _LOG_START) * 1000,
            "fields": {
                "request_id": self.request_id,
                "method": method,
                "path": path,
                "query": query,
                "route": self.route,
                "status": self.status,
                "duration_ms": round(milliseconds, 3),
                "client": self.client,
            },
        }
        return record


_RECORD_TEMPLATE = dict(
    vars(
        logging.makeLogRecord(
            {
                "name": log.name,
                "levelno": logging.INFO,
                "levelname": "INFO",
                "msg": _MESSAGE,
            }
        )
    )
)
_LOG_START: float = getattr(logging, "_startTime", time.time())


def write_now(line: RequestLine) -> None:
    """Hand the line to the `refimpl.requests` logger now, on the calling thread."""
    log.handle(line.record())


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
WriteLine = Callable[[RequestLine], None]


class RequestLog:
    """Makes each request's record; at its finish, counts it and hands its line on."""

    def __init__(self, observe: ObserveRequest) -> None:
        self._observe = observe
        self._write: WriteLine = write_now
        self._request_id = RequestIds()
        self._shapes = LineShapes()  # its lines' shapes, for whoever writes them

    def write_lines_to(self, write: WriteLine | None) -> None:
        """From now on hand the lines to `write` (a log thread's queue); None: write them
        at once again."""
        self._write = write or write_now

    def begin(self, environ: dict) -> RequestRecord:
        record = RequestRecord(
            self._request_id(environ.get("HTTP_X_REQUEST_ID")),
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
        if log.isEnabledFor(logging.INFO):
            # RequestLine(...) made by tuple's own __new__: no Python __new__ frame.
            fields = (
                time.time(),
                record.method,
                record.path,
                record.query,
                record.route,
                status,
                seconds,
                record.request_id,
                record.client,
                self._shapes,
            )
            self._write(tuple.__new__(RequestLine, fields))
