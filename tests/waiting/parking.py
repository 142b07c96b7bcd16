"""A reader parked in a waiting room for the room's tests (`test_room.py`,
`test_room_close.py`): its answer once a commit signal reaches the LSN it wants, and a wait
for a condition to come true."""

from __future__ import annotations

import threading
import time

from refimpl.engine.tracking.signals import CommitSignal
from refimpl.http.encode import Answer
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom


def park(
    room: WaitingRoom,
    signal: CommitSignal,
    wanted: int,
    wait: float,
    paced: bool = False,
    seen: int | None = None,
) -> tuple[Parked, list[Answer], threading.Event]:
    """Park in `room` a request answered `news` once `signal` reaches `wanted` (`nothing`
    at its deadline, `wait` seconds on): the parked request, the list its answer is put in,
    and the event its release sets."""
    got: list[Answer] = []
    released = threading.Event()

    def attempt(_: int) -> Answer | None:
        return Answer(b"news") if signal.lsn >= wanted else None

    deferred = Parked(
        signal,
        signal.lsn if seen is None else seen,
        attempt,
        lambda: Answer(b"nothing"),
        time.monotonic() + wait,
        released.set,
        kind=Kind.READER if paced else Kind.ACKNOWLEDGEMENT,
    )
    room.park(deferred)
    deferred.on_ready(got.append)
    return deferred, got, released
