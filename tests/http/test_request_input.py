"""Request input read strictly: query strings decoded piece by piece as parse_qsl decodes the
whole, and bodies within the limit."""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from refimpl.errors import BadRequest, PayloadTooLarge
from refimpl.http.request_input import (
    WHOLE_BODY_KEY,
    BodyReader,
    _decode,
    query_args,
    query_values,
)

_PIECES = st.text(alphabet="ab=&+%2FC3é;", max_size=12) | st.sampled_from(
    ["query=SELECT%201", "%ff", "%c3%a9=%c3", "db=x", "a=%zz", "x=1&x=2"]
)


def _as_whole(raw: str) -> dict[str, str] | str:
    """What the query string means decoded in one parse_qsl (the refusal's kind, if any)."""
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return "not valid UTF-8"
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    if any(len(values) > 1 for values in grouped.values()):
        return "give it once"
    return {name: values[0] for name, values in grouped.items()}


@given(st.lists(_PIECES, max_size=6).map("&".join))
def test_pieces_decode_as_the_whole_does(raw: str) -> None:
    for _ in range(2):  # the second time from the remembered pieces
        expected = _as_whole(raw)
        try:
            assert query_args({"QUERY_STRING": raw, "REQUEST_METHOD": "GET"}) == expected
        except BadRequest as refused:
            assert isinstance(expected, str) and expected in str(refused)


_SYMBOL_PIECES = _PIECES | st.sampled_from(
    ["symbol=A", "symbol=", "symbol", "sym%62ol=B", "symbol=%C3%A9+x", "symbol=a%26b", "symbol=S1"]
)


@given(st.lists(_SYMBOL_PIECES, max_size=6).map("&".join))
def test_a_parameters_values_are_werkzeugs_for_a_query_taken(raw: str) -> None:
    """`query_values` (/api/rev's symbols) gives what Werkzeug's args.getlist gives, for
    every query string `query_args` takes (a repeated name is a route's to take)."""
    environ = EnvironBuilder(query_string=raw).get_environ()
    try:
        query_args(environ, repeatable=frozenset({"symbol"}))
    except BadRequest:
        return  # refused before any route reads it
    for _ in range(2):  # the second time from the remembered pieces
        assert query_values(environ, "symbol") == Request(environ).args.getlist("symbol")


@given((st.text(max_size=12) | _PIECES).filter(lambda piece: "&" not in piece))
def test_a_piece_decodes_as_parse_qsl_decodes_it(piece: str) -> None:
    """One piece (no `&`), with or without escapes: parse_qsl's pairs, or its refusal."""
    try:
        expected = parse_qsl(piece, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        expected = None
    try:
        assert _decode(piece) == tuple(expected or ())
    except UnicodeDecodeError:
        assert expected is None


@pytest.mark.parametrize("whole", [True, False])
def test_a_body_the_server_holds_is_read_as_its_stream_is(whole: bool) -> None:
    """A body our server read whole into memory (WHOLE_BODY_KEY) is taken from there, not
    read again from `wsgi.input`: the same bytes, and the same refusal past the app's limit
    (which may be lower than the server's)."""
    reader = BodyReader(max_body_bytes=5)

    def environ(body: bytes) -> dict[str, Any]:
        made = {"CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
        return {**made, WHOLE_BODY_KEY: body} if whole else made

    for body in (b"", b"abc", b"abcde"):
        taken = environ(body)
        assert reader.read_environ(taken) == body
        assert reader.read_environ(taken) == body  # kept: read once
    with pytest.raises(PayloadTooLarge):
        reader.read_environ(environ(b"abcdef"))
