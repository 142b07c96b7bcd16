"""A request's text line, made from parts escaped one by one (and, for a long poll, from the
shape of its earlier lines), is the line its record formats to, whatever the fields hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.http.request_log import LineShapes, RequestLine
from refimpl.log_format import TextLineFormatter

_any_text = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "G\x85T"]),
    query=st.sampled_from(
        ["query=SELECT%201&id=s1.{}&wait=9", "id={}", "token=kdb_" + "a" * 30 + "&id=a.{}"]
    ),
    ids=st.lists(st.tuples(_any_text, st.integers(0, 10**20)), min_size=1, max_size=4),
    status=st.integers(100, 599),
    seconds=st.floats(0, 1e4),
    created=st.floats(0, 4e9),
)
def test_a_shaped_lines_parts_are_escaped_as_its_records(
    method: str,
    query: str,
    ids: list[tuple[str, int]],
    status: int,
    seconds: float,
    created: float,
) -> None:
    # The request ids are the fields a shape does not hold: any text, control characters
    # and line separators included (our server makes only printable ones).
    shapes = LineShapes()
    formatter = TextLineFormatter()
    for request_id, digits in ids:
        line = RequestLine(
            created,
            method,
            "/api/subscribe",
            query.format(digits),
            "/r",
            status,
            seconds,
            request_id,
            "c",
            shapes,
        )
        assert line.text_line(formatter) == formatter.format(line.record())


@settings(max_examples=200, deadline=None)
@given(
    created=st.floats(-4e9, 4e9),
    msec_format=st.sampled_from(["%s,%03d", "%s.%03d"]),
    request_id=_any_text,
)
def test_a_lines_time_is_its_records_whatever_the_time_and_its_format(
    created: float, msec_format: str, request_id: str
) -> None:
    # Times before 1970 too, and a formatter whose milliseconds are shown otherwise.
    formatter = TextLineFormatter()
    formatter.default_msec_format = msec_format
    line = RequestLine(created, "GET", "/api/rev", "", "/r", 200, 0.001, request_id, "c")
    assert line.text_line(formatter) == formatter.format(line.record())
