"""A parked request's kinds and states: the transition table, and handles by identity."""

from __future__ import annotations

import math

import pytest

from refimpl.engine.tracking.signals import CommitSignal
from refimpl.waiting.parked import (
    TRAITS,
    TRANSITIONS,
    InvalidMove,
    Kind,
    Move,
    Parked,
    Part,
    State,
    WrongKind,
)


def _parked(kind: Kind, released: list[int] | None = None) -> Parked[str]:
    signal = CommitSignal() if TRAITS[kind].on_commit else None
    count = released if released is not None else []
    return Parked(
        signal,
        0,
        lambda _: None,
        lambda: "nothing",
        math.inf,
        lambda: count.append(1),
        kind=kind,
    )


def test_every_kind_has_its_traits_and_only_a_stream_takes_parts() -> None:
    assert set(TRAITS) == set(TRANSITIONS) == set(Kind)
    for kind, moves in TRANSITIONS.items():
        assert ((State.WAITING, Move.PART) in moves) is TRAITS[kind].streaming
        assert moves[(State.WAITING, Move.ANSWER)] is State.ANSWERED
        assert moves[(State.ANSWERED, Move.DROP)] is State.ANSWERED


@pytest.mark.parametrize("kind", list(Kind))
def test_a_kind_that_does_not_fit_its_signal_is_refused(kind: Kind) -> None:
    wrong = None if TRAITS[kind].on_commit else CommitSignal()
    with pytest.raises(WrongKind, match=kind.value):
        Parked(wrong, 0, lambda _: None, lambda: None, math.inf, lambda: None, kind=kind)


@pytest.mark.parametrize("kind", [k for k in Kind if not TRAITS[k].streaming])
def test_a_part_for_a_request_that_is_no_stream_is_an_invalid_move(kind: Kind) -> None:
    parked = _parked(kind)
    with pytest.raises(InvalidMove, match=f"waiting {kind.value} cannot take part"):
        parked.decide(Part("a part"))
    assert parked.state is State.WAITING  # nothing moved


def test_a_stream_takes_parts_then_one_answer_released_once() -> None:
    released: list[int] = []
    parked = _parked(Kind.STREAM, released)
    got: list[str] = []
    parked.on_ready(got.append, got.append)
    assert parked.decide(Part("one")) is False
    assert parked.decide(Part("two")) is False
    assert parked.state is State.WAITING and not released
    assert parked.decide("last") is True
    assert parked.decide("again") is True  # decided already: handed to no one
    parked.drop()  # after the end: changes nothing
    assert got == ["one", "two", "last"]
    assert parked.state is State.ANSWERED and released == [1]
    with pytest.raises(InvalidMove, match="answered stream cannot take part"):
        parked.decide(Part("late"))


def test_a_dropped_request_is_released_once_and_never_answered() -> None:
    released: list[int] = []
    parked = _parked(Kind.LIVE, released)
    got: list[str] = []
    parked.on_ready(got.append)
    parked.drop()
    parked.drop()
    assert parked.decide("too late") is True
    assert parked.state is State.DROPPED and released == [1] and got == []


def test_requests_are_handles_equal_only_to_themselves() -> None:
    first, second = _parked(Kind.READER), _parked(Kind.READER)
    assert first != second and first == first
    assert len({first, second, first}) == 2
    assert {first: 1}.get(second) is None


@pytest.mark.parametrize("kind", list(Kind))
def test_drained_tells_the_request_s_flow_control_once_a_call(kind: Kind) -> None:
    # None given: nothing to tell, and no error.
    _parked(kind).drained()
    told: list[int] = []
    signal = CommitSignal() if TRAITS[kind].on_commit else None
    parked: Parked[str] = Parked(
        signal,
        0,
        lambda _: None,
        lambda: "nothing",
        math.inf,
        lambda: None,
        kind=kind,
        on_drained=lambda: told.append(1),
    )
    parked.drained()
    parked.drained()
    assert told == [1, 1]
