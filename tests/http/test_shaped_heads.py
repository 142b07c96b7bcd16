"""An answer sent at once makes the bytes its head and body make, whichever way
`answer_bytes` takes: the kept head of the commonest shape (an `Answer`'s Content-Type and
Content-Length, then the app's Server-Timing and request id) or the general one; and so
does a write's acknowledgement (`heads.named_answer_bytes`: an `Answer`'s two headers and
the request id)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder

from refimpl.engine.instance import Instance
from refimpl.http.app import App, AppOptions
from refimpl.http.encode import Answer
from refimpl.http.serving import wire
from refimpl.http.serving.heads import named_answer_bytes

_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
# The app's two last, and names that differ from them in a letter, or the Date.
_name = st.sampled_from(
    ["Server-Timing", "X-Request-Id", "Server-timing", "X-Request-ID", "Date", "%s"]
)


@given(
    body=st.binary(max_size=40),
    status=st.sampled_from([200, 400, 403, 500]),
    kind=st.sampled_from(["application/json", "text/csv; charset=utf-8", "a/%s%d%%"]),
    added=st.lists(st.tuples(_name, _text), max_size=3),
    keep=st.booleans(),
)
def test_an_answer_sent_at_once_is_its_head_and_body(
    body: bytes, status: int, kind: str, added: list[tuple[str, str]], keep: bool
) -> None:
    answer = Answer(body, status, kind)
    answer.headers += added
    general = wire.answer_head(answer.status, answer.headers, chunked=False, keep_alive=keep)
    made = wire.answer_bytes(answer, keep, True)
    if made != general + body:  # the Date's second turned in between: once more
        general = wire.answer_head(answer.status, answer.headers, chunked=False, keep_alive=keep)
        assert made == general + body


@given(
    body=st.binary(max_size=40),
    status=st.sampled_from([200, 400, 403, 500]),
    kind=st.sampled_from(["application/json", "text/csv; charset=utf-8", "a/%s%d%%"]),
    added=st.lists(st.tuples(_name, _text), max_size=2),
    name=_name,
    value=_text,
    keep=st.booleans(),
    with_body=st.booleans(),
)
def test_an_acknowledgement_is_its_head_and_body(
    body: bytes,
    status: int,
    kind: str,
    added: list[tuple[str, str]],
    name: str,
    value: str,
    keep: bool,
    with_body: bool,
) -> None:
    answer = Answer(body, status, kind)
    answer.headers += added
    made = named_answer_bytes(answer, keep, with_body, name, value)
    for _ in range(2):  # the Date's second may turn in between: once more
        general = wire.answer_head(
            answer.status, answer.headers, chunked=False, keep_alive=keep, extra=(name, value)
        )
        if made == (general + body if with_body else general):
            return
    raise AssertionError(f"{made!r} is not {general!r} and its body")


def test_the_app_s_answers_have_the_kept_shape(tmp_path: Path) -> None:
    """The kept heads are for the answers `App.answer` sends: a change of their headers
    must change both, else the kept heads would never be used."""
    instance = Instance.open(tmp_path)
    app = App(instance, AppOptions(dev=True))
    try:
        environ = EnvironBuilder(
            path="/exec", method="POST", data=b"SELECT 1", content_type="text/plain"
        ).get_environ()
        answer = app.answer(environ)
        assert isinstance(answer, Answer)
        assert tuple(name for name, _ in answer.headers) == wire._SHAPED_NAMES
    finally:
        app.begin_shutdown()
        instance.close()
