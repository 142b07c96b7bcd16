"""The event stream's sending states: every move the table allows, and the ones it does not."""

from __future__ import annotations

import itertools

import pytest

from refimpl.http.endpoints.stream_states import (
    TRANSITIONS,
    IllegalTransition,
    SendEvent,
    SendState,
    move,
)

S, E = SendState, SendEvent

# The whole table, written out again: a row changed by mistake there fails here.
EXPECTED = {
    (S.IDLE, E.TOOK_PART): S.SENDING,
    (S.IDLE, E.TOOK_PART_MORE): S.SENDING_MORE,
    (S.IDLE, E.TOOK_NOTHING): S.IDLE,
    (S.HELD, E.TOOK_PART): S.SENDING,
    (S.HELD, E.TOOK_PART_MORE): S.SENDING_MORE,
    (S.HELD, E.TOOK_NOTHING): S.IDLE,
    (S.SENDING, E.WOKEN): S.SENDING_MORE,
    (S.SENDING_MORE, E.WOKEN): S.SENDING_MORE,
    (S.IDLE, E.WOKEN_IN_HOLD): S.HELD,
    (S.HELD, E.WOKEN_IN_HOLD): S.HELD,
    (S.SENDING, E.DRAINED): S.IDLE,
    (S.SENDING_MORE, E.DRAINED): S.IDLE,
    (S.IDLE, E.DRAINED): S.IDLE,
    (S.HELD, E.DRAINED): S.HELD,
    (S.IDLE, E.BACKLOGGED): S.SENDING_MORE,
    (S.SENDING, E.BACKLOGGED): S.SENDING_MORE,
    (S.SENDING_MORE, E.BACKLOGGED): S.SENDING_MORE,
    (S.IDLE, E.TIMED_OUT): S.IDLE,
    (S.HELD, E.TIMED_OUT): S.IDLE,
}


def test_the_table_is_the_one_written_here() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("state", "event"), sorted(EXPECTED, key=str))
def test_each_allowed_move_gives_its_state(state: SendState, event: SendEvent) -> None:
    assert move(state, event) is EXPECTED[(state, event)]


def test_a_part_in_flight_is_never_taken_over() -> None:
    with pytest.raises(IllegalTransition, match="a stream sending cannot be took a part"):
        move(S.SENDING, E.TOOK_PART)


@pytest.mark.parametrize(
    ("state", "event"),
    [pair for pair in itertools.product(SendState, SendEvent) if pair not in EXPECTED],
)
def test_every_move_the_table_does_not_list_raises(state: SendState, event: SendEvent) -> None:
    with pytest.raises(IllegalTransition):
        move(state, event)


def test_a_flow_of_one_stream() -> None:
    """Took a part, woken while it is sent, drained (takes again), took the rest, drained."""
    state = S.IDLE
    for event in (E.TOOK_PART, E.WOKEN, E.DRAINED, E.TOOK_PART, E.DRAINED, E.TOOK_NOTHING):
        state = move(state, event)
    assert state is S.IDLE
