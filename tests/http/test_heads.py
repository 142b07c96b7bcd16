"""An answer head's template makes, for every answer it takes, the bytes `answer_bytes` makes
(whatever the status, the headers and their values, a "%" or an application's Date among
them); it takes an answer only when the two differ in the Content-Length's value alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.http.encode import Answer
from refimpl.http.serving import wire
from refimpl.http.serving.heads import template_of

_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
_name = st.one_of(
    st.sampled_from(["Cache-Control", "Date", "X-Accel-Buffering", "%d", "A%"]),
    st.from_regex(r"[A-Za-z][A-Za-z0-9%-]{0,10}", fullmatch=True),
)
_headers = st.dictionaries(_name, _text, max_size=4)
_answers = st.builds(
    Answer,
    st.binary(max_size=40),
    st.sampled_from([200, 400, 403, 500]),
    st.sampled_from(["text/event-stream; charset=utf-8", "application/json", "a/%s%d"]),
    _headers,
)


def _made(answer: Answer, keep: bool, value: str) -> set[bytes]:
    """What `answer_bytes` makes of it (two, should the Date's second turn meanwhile)."""
    extra = ("X-Request-Id", value)
    first = wire.answer_bytes(answer, keep, True, extra)
    return {first, wire.answer_bytes(answer, keep, True, extra)}


@given(_answers, st.binary(max_size=40), st.booleans(), _text)
def test_a_template_makes_what_answer_bytes_makes(
    answer: Answer, other_body: bytes, keep: bool, value: str
) -> None:
    template = template_of(answer, keep, "X-Request-Id")
    assert template is not None
    assert template.bytes_of(answer, keep, "X-Request-Id", value) in _made(answer, keep, value)
    # Another answer alike but for its body (and so its length): the same template.
    other = Answer(other_body, answer.status_code, answer.headers[0][1])
    other.headers += answer.headers[2:]
    made = template.bytes_of(other, keep, "X-Request-Id", value)
    assert made in _made(other, keep, value)


@given(_answers, _answers, st.booleans(), st.booleans())
def test_a_template_serves_only_answers_alike_but_for_their_length(
    first: Answer, second: Answer, keep: bool, second_keep: bool
) -> None:
    template = template_of(first, keep, "X-Request-Id")
    assert template is not None
    alike = (
        first.status == second.status
        and first.headers[0] == second.headers[0]
        and first.headers[2:] == second.headers[2:]
        and keep == second_keep
    )
    made = template.bytes_of(second, second_keep, "X-Request-Id", "v")
    assert (made is not None) == alike
    assert template.bytes_of(first, keep, "X-Other", "v") is None


def test_no_template_without_a_content_length_second() -> None:
    answer = Answer(b"x")
    answer.headers = [("Content-Type", "text/plain")]
    assert template_of(answer, True, "X-Request-Id") is None
    answer.headers = [("Content-Type", "text/plain"), ("X-Length", "1")]
    assert template_of(answer, True, "X-Request-Id") is None
