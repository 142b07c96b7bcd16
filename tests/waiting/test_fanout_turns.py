"""A headed round's turns at the interpreter lock (`SharedSends.send_headed`): counted in the
sending thread's own CPU time, so that its time off the processor brings no pause."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from refimpl.waiting import fanout
from refimpl.waiting.fanout import (
    TURN_PAUSE_SECONDS,
    TURN_SECONDS,
    FanoutPace,
    taking_turns,
)
from refimpl.waiting.room import WaitingRoom


def test_turns_with_the_threads_time_pause_only_after_a_turn_of_both_clocks():
    clock, ran = [0.0], [0.0]
    pauses: list[float] = []

    def spend(items: Iterable[int], wall: float, cpu: float) -> Iterator[int]:
        for item in items:
            clock[0] += wall
            ran[0] += cpu
            yield item

    def turns() -> Iterator[int]:
        return taking_turns(range(10), pauses.append, lambda: clock[0], ran=lambda: ran[0])

    # Off the processor (the clock runs, the thread's time does not): no pause.
    assert list(spend(turns(), TURN_SECONDS, 0.0)) == list(range(10)) and pauses == []
    # Running all along: one after each turn, as with the clock alone.
    assert list(spend(turns(), TURN_SECONDS, TURN_SECONDS)) == list(range(10))
    assert pauses == [TURN_PAUSE_SECONDS] * 10
    pauses.clear()
    # Half of the time on the processor: one pause each two turns of the clock.
    assert list(spend(turns(), TURN_SECONDS, TURN_SECONDS / 2)) == list(range(10))
    assert len(pauses) == 5


def _headed_round(send: Callable[[], None], monkeypatch) -> list[float]:
    """The pauses of one headed round of six streams, each send being `send`."""
    pauses: list[float] = []

    def recorded(items, pause=time.sleep, clock=time.monotonic, turn=TURN_SECONDS, **ran):
        return taking_turns(items, pauses.append, clock, turn, **ran)

    monkeypatch.setattr(fanout, "taking_turns", recorded)
    room: WaitingRoom[str] = WaitingRoom(str, FanoutPace())
    sent: list[object] = []

    def headed(parts: Iterable[tuple[object, bytes]], body: bytes) -> None:
        for outlet, head in parts:
            send()
            sent.append((outlet, head + body))

    room.share_with(lambda outlets, answer, on_backlog: None, headed)
    try:
        room.send_headed([(n, b"id: %d\n" % n) for n in range(6)], b"event: rows\n\n")
    finally:
        room.close()
    assert sent == [(n, b"id: %d\nevent: rows\n\n" % n) for n in range(6)]
    return pauses


def test_a_headed_round_off_the_processor_takes_no_pause(monkeypatch):
    # Each send blocks for more than a turn of the clock, the thread using no CPU time.
    assert _headed_round(lambda: time.sleep(TURN_SECONDS * 1.5), monkeypatch) == []


def test_a_headed_round_that_runs_takes_its_turns(monkeypatch):
    def spin() -> None:  # a turn and a half of the thread's own time
        until = time.thread_time() + TURN_SECONDS * 1.5
        while time.thread_time() < until:
            pass

    assert len(_headed_round(spin, monkeypatch)) >= 3
