"""Query strings decoded strictly, piece by piece, as parse_qsl decodes the whole."""

from __future__ import annotations

from urllib.parse import parse_qsl

from hypothesis import given
from hypothesis import strategies as st

from refimpl.errors import BadRequest
from refimpl.http.request_input import query_args

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
