"""Reading a request's input strictly: its body within the size limit, its query string.

Imports no other http module: the app, the route context and the tests all use it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.datastructures import FileStorage
from werkzeug.wrappers import Request

from refimpl.errors import BadRequest, PayloadTooLarge

READ_CHUNK = 1024 * 1024  # a body read buffers at most this much at once
# Query parameters (`name=value`, as sent) up to this many characters have their decoding
# remembered: a long poll asks again and again with the same SQL in its `query=`.
REMEMBERED_PARAMETER = 2048
# Our server's environ key for the bytes of a body it holds in memory, the same bytes its
# `wsgi.input` reads: a body read from it (`BodyReader.read_environ`) is not copied again.
WHOLE_BODY_KEY = "refimpl.whole_body"


class BodyReader:
    """Reads bodies up to `max_body_bytes`; a body is read once and kept in the environ."""

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes

    def _limit(self, request: Request) -> None:
        request.max_content_length = self.max_body_bytes
        request.max_form_memory_size = self.max_body_bytes

    def read_body(self, request: Request) -> bytes:
        """The whole body, or PayloadTooLarge past `max_body_bytes` (chunked bodies too)."""
        return self.read_environ(request.environ)

    def read_environ(self, environ: dict[str, Any]) -> bytes:
        """`read_body` from a WSGI environ alone: no Werkzeug `Request` is made for it."""
        cached = environ.get("kdb.body")
        if cached is not None:
            return cached
        limit = self.max_body_bytes
        whole = environ.get(WHOLE_BODY_KEY)
        if whole is not None and len(whole) <= limit:
            environ["kdb.body"] = whole
            return whole
        declared = environ.get("CONTENT_LENGTH", "").strip()
        length = int(declared) if declared.isascii() and declared.isdigit() else None
        if length is not None and length > limit:
            raise self._too_large()
        stream = environ["wsgi.input"]
        if "wsgi.input_terminated" in environ:
            # A chunked body: the server ends the stream, so read it ourselves up to one
            # byte past the limit (Werkzeug's own limit would cut it off silently).
            parts: list[bytes] = []
            size = 0
            while size <= limit:
                part = stream.read(min(65536, limit + 1 - size))
                if not part:
                    break
                parts.append(part)
                size += len(part)
            if size > limit:
                raise self._too_large()
            data = b"".join(parts)
        elif length is not None:
            # The input stream ends at the declared length; a read may return less. Most
            # bodies come whole in the first read.
            data = stream.read(min(length, READ_CHUNK)) if length else b""
            if 0 < len(data) < length:
                parts = [data]
                length -= len(data)
                while length > 0:
                    part = stream.read(min(length, READ_CHUNK))
                    if not part:
                        break
                    parts.append(part)
                    length -= len(part)
                data = b"".join(parts)
        else:
            # Neither a length nor an ended stream: no body, as Werkzeug reads it too (a
            # stream of unknown length is never read past its request).
            data = b""
        environ["kdb.body"] = data
        return data

    def _too_large(self) -> PayloadTooLarge:
        mb = self.max_body_bytes / (1024 * 1024)
        return PayloadTooLarge(
            f"the request body is larger than this server's limit of {mb:g} MB (max_body_mb)"
        )

    def read_form(self, request: Request) -> dict[str, str]:
        self._limit(request)
        form = request.form
        if request.files:
            raise BadRequest("send the SQL as a form field, not a file")
        return _single_values(form.lists(), "form field")

    def read_files(self, request: Request) -> dict[str, FileStorage]:
        self._limit(request)
        if request.form:
            raise BadRequest(f"unexpected form field(s): {', '.join(sorted(request.form))}")
        out: dict[str, FileStorage] = {}
        for name, items in request.files.lists():
            if len(items) != 1:
                raise BadRequest(f"the form file '{name}' is sent more than once")
            out[name] = items[0]
        return out


def query_args(
    environ: Mapping[str, Any], repeatable: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The query parameters of a WSGI environ, decoded strictly: bad UTF-8 and repeated
    names are refused.

    Werkzeug would replace undecodable bytes silently; SQL must never run altered.
    """
    raw = environ.get("QUERY_STRING", "")
    if not raw:
        return {}
    grouped: dict[str, list[str]] = {}
    try:
        # parse_qsl splits at '&' before it decodes: decoding each piece on its own gives
        # the same pairs, and lets a piece sent before be decoded from memory.
        for piece in raw.split("&"):
            pairs = _decoded(piece) if len(piece) <= REMEMBERED_PARAMETER else _decode(piece)
            for name, value in pairs:
                grouped.setdefault(name, []).append(value)
    except UnicodeDecodeError:
        raise BadRequest("the query string is not valid UTF-8") from None
    except ValueError as exc:
        raise BadRequest(f"the query string is malformed: {exc}") from None
    # A repeatable parameter (symbol= of /api/rev) is read as a list by its route.
    for name in repeatable & grouped.keys():
        grouped[name] = grouped[name][-1:]
    return _single_values(grouped.items(), "query parameter")


def query_values(environ: Mapping[str, Any], name: str) -> list[str]:
    """Every value of the query parameter `name`, in the order sent, decoded as `query_args`
    decodes them (which a route calls first: it refuses a malformed query string); what
    Werkzeug's `args.getlist` gives for such a query, without making its request."""
    raw = environ.get("QUERY_STRING", "")
    if name not in raw and "%" not in raw and "+" not in raw:
        return []  # no piece can decode to the name (most of /api/rev's: no symbol=)
    found: list[str] = []
    for piece in raw.split("&"):
        pairs = _decoded(piece) if len(piece) <= REMEMBERED_PARAMETER else _decode(piece)
        found += [value for key, value in pairs if key == name]
    return found


def _decode(piece: str) -> tuple[tuple[str, str], ...]:
    """The pairs of one piece of a query string (none or one), decoded strictly."""
    if "%" not in piece and "+" not in piece:
        # Nothing to decode (a long poll's new `id=` at every request): what parse_qsl
        # gives for it, without its Python (a fifth of a long poll's query string).
        if not piece:
            return ()
        name, _, value = piece.partition("=")
        return ((name, value),)
    return tuple(parse_qsl(piece, keep_blank_values=True, encoding="utf-8", errors="strict"))


# A pure function of its text; a failing decode raises and is not remembered.
_decoded = functools.lru_cache(maxsize=1024)(_decode)


def _single_values(items: Iterable[tuple[str, list[str]]], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, values in items:
        if len(values) != 1:
            raise BadRequest(f"the {what} '{name}' is given {len(values)} times; give it once")
        out[name] = values[0]
    return out
