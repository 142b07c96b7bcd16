"""The sending states of one event stream, as a transition table (in the manner of h11).

A stream (`stream_route._Sender`) sends one part at a time: the next is made only once the
server has sent the last one whole (flow control), and a stream with `squash=<seconds>`
holds its next part back for that long. Where it stands in that is one `SendState`, moved
only by `move(state, event)` along `TRANSITIONS`; a move the table does not list is a bug
and raises `IllegalTransition` instead of leaving the stream in a state nobody meant.

A take (the stream's next events, through its `where=` filter or its initial copy: its
owner's work, seconds of it at worst) runs in a state of its own, `TAKING`, and no lock is
held meanwhile: whatever comes during it (a wake-up, a part sent, a heartbeat sent, its
group's part left unsent) only moves the state, and the take's end acts on what was
recorded. The waiting room's thread, which sends every other stream, thus never waits for a
take. Only one take runs at a time: one starts from `IDLE` or `HELD` only.
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
    TAKING = "taking"  # its next events are being taken (nothing of its own in flight)
    # And it was woken, or its group's part was left unsent, meanwhile: once the take ends
    # it takes again (after the part it took, if any, is sent).
    TAKING_MORE = "taking, woken meanwhile"


class SendEvent(enum.Enum):
    __hash__ = object.__hash__  # as SendState's

    TAKE = "take"  # a take starts
    TOOK_PART = "took a part"  # a take gave events, and nothing more is ready
    TOOK_PART_MORE = "took a part, more ready"  # a take stopped at the budget
    TOOK_NOTHING = "took nothing"  # a take gave no event
    WOKEN = "woken while sending"  # a commit (or its end) while a part is in flight
    WOKEN_IN_HOLD = "woken in a hold"  # a commit during a squash hold
    DRAINED = "drained"  # every part handed over so far was sent (heartbeats included)
    BACKLOGGED = "backlogged"  # its client did not take its group's part whole
    # Its take raised (its own work ran past the statement timeout, or failed): it ends.
    TAKE_FAILED = "failed to take"


class IllegalTransition(RuntimeError):
    """A stream was moved in a way its state does not allow (a bug)."""


_S, _E = SendState, SendEvent
# (state, event) -> the state after it. A stream takes only when nothing is in flight (idle,
# or held and its hold is over) and no take runs; a part in flight is never taken again over.
TRANSITIONS: dict[tuple[SendState, SendEvent], SendState] = {
    (_S.IDLE, _E.TAKE): _S.TAKING,
    (_S.HELD, _E.TAKE): _S.TAKING,
    (_S.TAKING, _E.TOOK_PART): _S.SENDING,
    (_S.TAKING, _E.TOOK_PART_MORE): _S.SENDING_MORE,
    (_S.TAKING, _E.TOOK_NOTHING): _S.IDLE,
    # Woken during the take: it takes again once the part it took is sent; having taken
    # nothing, it goes back to idle and its sender wakes it again at once.
    (_S.TAKING_MORE, _E.TOOK_PART): _S.SENDING_MORE,
    (_S.TAKING_MORE, _E.TOOK_PART_MORE): _S.SENDING_MORE,
    (_S.TAKING_MORE, _E.TOOK_NOTHING): _S.IDLE,
    (_S.TAKING, _E.WOKEN): _S.TAKING_MORE,
    (_S.TAKING_MORE, _E.WOKEN): _S.TAKING_MORE,
    # A heartbeat sent during the take: nothing of its own was in flight, nothing changes.
    (_S.TAKING, _E.DRAINED): _S.TAKING,
    (_S.TAKING_MORE, _E.DRAINED): _S.TAKING_MORE,
    (_S.TAKING, _E.BACKLOGGED): _S.TAKING_MORE,
    (_S.TAKING_MORE, _E.BACKLOGGED): _S.TAKING_MORE,
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
    (_S.TAKING, _E.TAKE_FAILED): _S.IDLE,
    (_S.TAKING_MORE, _E.TAKE_FAILED): _S.IDLE,
}


def move(state: SendState, event: SendEvent) -> SendState:
    """The state after `event` in `state`; IllegalTransition where the table has none."""
    after = TRANSITIONS.get((state, event))
    if after is None:
        raise IllegalTransition(f"a stream {state.value} cannot be {event.value}")
    return after
