"""The event stream's SSE blocks (`stream_route.encode_events`), for any events: each an
`id` line when it has an id, its `event` and `data` lines and a blank line, `retry` first for
a `ready` (spec/stream.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.features.event_cursor import CHANGE, READY, RESET, Event
from refimpl.http.endpoints.stream_route import RETRY_MS, encode_events

ids = st.sampled_from(["", "0", "42", "7.3"]) | st.from_regex(
    r"[0-9]{1,19}(\.[0-9]{1,5})?", fullmatch=True
)
events = st.builds(
    Event,
    ids,
    st.sampled_from([CHANGE, READY, RESET, "state"]),
    st.binary(max_size=40),
    st.none(),
)


def _block(event: Event) -> bytes:
    retry = f"retry: {RETRY_MS}\n" if event.kind == READY else ""
    head = f"id: {event.id}\n" if event.id else ""
    return f"{retry}{head}event: {event.kind}\ndata: ".encode() + event.data + b"\n\n"


@given(st.lists(events, max_size=20))
def test_each_event_is_one_block_in_order(taken: list[Event]) -> None:
    assert encode_events(taken) == b"".join(_block(event) for event in taken)
