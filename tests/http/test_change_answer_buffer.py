"""A big page's JSON answer is written into one buffer as it is encoded (`_extend_array`
appends each step to the array that ends it): the bytes are those of the whole answer
encoded at once, whatever the steps, and a step msgspec refuses (an integer beyond 64 bits)
is written by the fallback in its place."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.features.change_stream import ChangeBatch, read_runs
from refimpl.http.endpoints import change_encoding
from refimpl.http.endpoints.change_encoding import encode_json_answer
from tests.http.change_pages import ROWS, big_table

_items = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits: the fallback's
    st.text(max_size=5),
    st.none(),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2),
    st.lists(st.integers(0, 9), max_size=2),
)


@given(
    prefix=st.sampled_from([b"", b'{"changes":']),
    steps=st.lists(st.lists(_items, min_size=1, max_size=4), max_size=5),
)
def test_steps_appended_make_one_array(prefix: bytes, steps: list[list[object]]) -> None:
    buffer = bytearray(prefix + b"[]")
    for step in steps:
        change_encoding._extend_array(buffer, step)
    assert bytes(buffer[: len(prefix)]) == prefix
    assert json.loads(bytes(buffer[len(prefix) :])) == [item for step in steps for item in step]


def test_a_page_of_several_steps_is_the_whole_answer_encoded_at_once() -> None:
    with big_table('t"q') as (database, schema, names, kinds):
        page = read_runs(database, 't"q', schema, 0, ROWS + 1)
        made = encode_json_answer('t"q', page, names, kinds, 7, 1)
        events = change_encoding._events(page, names, kinds, change_encoding.PLAIN)
        whole = msgspec.json.encode(
            {
                "table": 't"q',
                "changes": events,
                "next": page.next_lsn,
                "more": page.more,
                "durable_lsn": 7,
                "oldest_lsn": 1,
            }
        )
        assert len(events) == ROWS + 1  # the CREATE, then the rows: three steps
        assert made == whole


def test_an_empty_page_the_one_call_refuses_is_still_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A page of no change whose answer the one encoder call refuses (never seen: its
    fields are a name and integers) is still written whole, with an empty `changes`."""
    real = change_encoding._encode

    def refusing(answer: object) -> bytes:
        if isinstance(answer, change_encoding._JsonAnswer) and isinstance(answer.changes, list):
            raise OverflowError("refused")
        return real(answer)

    monkeypatch.setattr(change_encoding, "_encode", refusing)
    page = ChangeBatch([], 12, False)
    made = encode_json_answer("t", page, ("id",), {"id": "INT"}, 7, 1)
    assert msgspec.json.decode(made) == {
        "table": "t",
        "changes": [],
        "next": 12,
        "more": False,
        "durable_lsn": 7,
        "oldest_lsn": 1,
    }
