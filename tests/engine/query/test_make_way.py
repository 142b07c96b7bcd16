"""`deadlines.make_way`: long work that holds no lock pauses (the interpreter lock let go) after
each TURN_SECONDS of its steps, and not more often."""

from __future__ import annotations

import threading
import time

import pytest

from refimpl.engine.query import deadlines


def test_long_work_pauses_once_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    real_sleep = time.sleep

    def recorded(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(deadlines.time, "sleep", recorded)

    def work() -> None:
        # 60 ms of steps, each far shorter than a turn.
        until = time.monotonic() + 0.060
        while time.monotonic() < until:
            deadlines.make_way()

    # A thread of its own: its first call starts its turn, whatever other tests did.
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert pauses, "60 ms of work never let the lock go"
    assert set(pauses) == {deadlines.TURN_PAUSE_SECONDS}
    # At most one pause a turn (the pauses themselves take time too).
    assert len(pauses) <= 0.060 / deadlines.TURN_SECONDS + 1


def test_short_work_does_not_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(deadlines.time, "sleep", pauses.append)

    def work() -> None:
        for _ in range(3):
            deadlines.make_way()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert pauses == []
