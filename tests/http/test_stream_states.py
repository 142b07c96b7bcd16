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
    (S.IDLE, E.TAKE): S.TAKING,
    (S.HELD, E.TAKE): S.TAKING,
    (S.TAKING, E.TOOK_PART): S.SENDING,
    (S.TAKING, E.TOOK_PART_MORE): S.SENDING_MORE,
    (S.TAKING, E.TOOK_NOTHING): S.IDLE,
    (S.TAKING_MORE, E.TOOK_PART): S.SENDING_MORE,
    (S.TAKING_MORE, E.TOOK_PART_MORE): S.SENDING_MORE,
    (S.TAKING_MORE, E.TOOK_NOTHING): S.IDLE,
    (S.TAKING, E.WOKEN): S.TAKING_MORE,
    (S.TAKING_MORE, E.WOKEN): S.TAKING_MORE,
    (S.TAKING, E.DRAINED): S.TAKING,
    (S.TAKING_MORE, E.DRAINED): S.TAKING_MORE,
    (S.TAKING, E.BACKLOGGED): S.TAKING_MORE,
    (S.TAKING_MORE, E.BACKLOGGED): S.TAKING_MORE,
    (S.TAKING, E.TAKE_FAILED): S.IDLE,
    (S.TAKING_MORE, E.TAKE_FAILED): S.IDLE,
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
}


def test_the_table_is_the_one_written_here() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("state", "event"), sorted(EXPECTED, key=str))
def test_each_allowed_move_gives_its_state(state: SendState, event: SendEvent) -> None:
    assert move(state, event) is EXPECTED[(state, event)]


def test_a_part_in_flight_is_never_taken_over() -> None:
    with pytest.raises(IllegalTransition, match="a stream sending cannot be took a part"):
        move(S.SENDING, E.TOOK_PART)


@pytest.mark.parametrize("state", [S.SENDING, S.SENDING_MORE, S.TAKING, S.TAKING_MORE])
def test_no_take_starts_while_a_part_is_in_flight_or_a_take_runs(state: SendState) -> None:
    with pytest.raises(IllegalTransition, match="cannot be take"):
        move(state, E.TAKE)


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
    for event in (E.TAKE, E.TOOK_PART, E.WOKEN, E.DRAINED, E.TAKE, E.TOOK_PART, E.DRAINED):
        state = move(state, event)
    assert state is S.IDLE
    assert move(move(state, E.TAKE), E.TOOK_NOTHING) is S.IDLE


def test_a_heartbeat_sent_during_a_take_changes_nothing() -> None:
    """The room's thread sends a heartbeat while the stream's filter runs: `drained` only
    records it, and the take's part is then in flight as if no heartbeat had been sent."""
    state = move(move(S.IDLE, E.TAKE), E.DRAINED)
    assert state is S.TAKING
    assert move(state, E.TOOK_PART) is S.SENDING


def test_a_wake_up_during_a_take_takes_again_after_its_part() -> None:
    """A commit during the take: the part taken goes out, and the next take comes once it
    is sent (SENDING_MORE: `drained` makes it take again); a heartbeat sent meanwhile
    forgets nothing."""
    state = S.IDLE
    for event in (E.TAKE, E.WOKEN, E.DRAINED, E.TOOK_PART):
        state = move(state, event)
    assert state is S.SENDING_MORE


def test_a_take_that_fails_leaves_no_take_running() -> None:
    assert move(move(move(S.HELD, E.TAKE), E.WOKEN), E.TAKE_FAILED) is S.IDLE
