"""The sending states of one event stream, as a transition table (in the manner of h11).

A stream (`stream_route._Sender`) sends one part at a time: the next is made only once the
server has sent the last one whole (flow control), and a stream with `squash=<seconds>`
holds its next part back for that long. Where it stands in that is one `SendState`, moved
only by `move(state, event)` along `TRANSITIONS`; a move the table does not list is a bug
and raises `IllegalTransition` instead of leaving the stream in a state nobody meant.
"""

from __future__ import annotations

import enum


class SendState(enum.Enum):
    # Members are singletons: hashed by identity, in C (Enum's own hash is Python code, paid
    # at each move, thus at each part of a thousand streams).
    __hash__ = object.__hash__

    IDLE = "idle"  # nothing handed over: a wake-up takes at once
    HELD = "held"  # woken during a squash hold: it takes once the hold is over
    SENDING = "sending"  # a part was handed over and is not yet sent whole
    SENDING_MORE = "sending more"  # and it was woken meanwhile: it takes again once sent


class SendEvent(enum.Enum):
    __hash__ = object.__hash__  # as SendState's

    TOOK_PART = "took a part"  # a take gave events, and nothing more is ready
    TOOK_PART_MORE = "took a part, more ready"  # a take stopped at the budget
    TOOK_NOTHING = "took nothing"  # a take gave no event
    WOKEN = "woken while sending"  # a commit (or its end) while a part is in flight
    WOKEN_IN_HOLD = "woken in a hold"  # a commit during a squash hold
    DRAINED = "drained"  # every part handed over so far was sent (heartbeats included)
    BACKLOGGED = "backlogged"  # its client did not take its group's part whole
    TIMED_OUT = "timed out"  # its own work ran past the statement timeout: it ends


class IllegalTransition(RuntimeError):
    """A stream was moved in a way its state does not allow (a bug)."""


_S, _E = SendState, SendEvent
_TAKES = {
    (_E.TOOK_PART, _S.SENDING),
    (_E.TOOK_PART_MORE, _S.SENDING_MORE),
    (_E.TOOK_NOTHING, _S.IDLE),
}
# (state, event) -> the state after it. A stream takes only when nothing is in flight (idle,
# or held and its hold is over); a part in flight is never taken again over.
TRANSITIONS: dict[tuple[SendState, SendEvent], SendState] = {
    **{(state, event): after for state in (_S.IDLE, _S.HELD) for event, after in _TAKES},
    (_S.SENDING, _E.WOKEN): _S.SENDING_MORE,
    (_S.SENDING_MORE, _E.WOKEN): _S.SENDING_MORE,
    (_S.IDLE, _E.WOKEN_IN_HOLD): _S.HELD,
    (_S.HELD, _E.WOKEN_IN_HOLD): _S.HELD,
    (_S.SENDING, _E.DRAINED): _S.IDLE,
    (_S.SENDING_MORE, _E.DRAINED): _S.IDLE,
    (_S.IDLE, _E.DRAINED): _S.IDLE,  # a heartbeat, or its group's part, was sent
    (_S.HELD, _E.DRAINED): _S.HELD,  # a heartbeat sent during the hold
    # A member of a group (never held) goes on alone, and takes on once the part is sent.
    (_S.IDLE, _E.BACKLOGGED): _S.SENDING_MORE,
    (_S.SENDING, _E.BACKLOGGED): _S.SENDING_MORE,
    (_S.SENDING_MORE, _E.BACKLOGGED): _S.SENDING_MORE,
    (_S.IDLE, _E.TIMED_OUT): _S.IDLE,
    (_S.HELD, _E.TIMED_OUT): _S.IDLE,
}


def move(state: SendState, event: SendEvent) -> SendState:
    """The state after `event` in `state`; IllegalTransition where the table has none."""
    after = TRANSITIONS.get((state, event))
    if after is None:
        raise IllegalTransition(f"a stream {state.value} cannot be {event.value}")
    return after
