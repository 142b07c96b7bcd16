"""A closed waiting room lets its thread go at once, and with it what the room holds.

The room and its thread hold each other (the thread runs the room's method; the room's
signals, pools and paces refer back to it): reference counting cannot free them, the
collector can once the thread has ended. Before, a closed room's thread slept out its empty
look (`EMPTY_LOOK_SECONDS`) first, so the room became garbage at an unforeseen moment after
its server's stop: inside a later cycle count of tests/http/test_app.py in a shared test
process (the clean-clone CI run of 63bf6e8 found 171 such objects: a room, its owner pool,
its fan-out pace and commit signal, their locks and methods).
"""

from __future__ import annotations

import gc
import time
import weakref

import pytest

from refimpl.engine.tracking.signals import CommitSignal
from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting import room as room_module
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom


def test_a_closed_rooms_thread_ends_at_once_and_the_room_is_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(room_module, "EMPTY_LOOK_SECONDS", 60.0)
    room, signal = WaitingRoom(to_response), CommitSignal()
    got: list[Answer] = []
    reader = Parked(
        signal,
        signal.lsn,
        lambda _: None,  # no news: it waits
        lambda: Answer(b"nothing"),
        time.monotonic() + 60,
        lambda: None,
        kind=Kind.READER,
    )
    room.park(reader)  # the room's thread runs
    reader.on_ready(got.append)
    thread = room._thread
    assert thread is not None and thread.is_alive()
    stop = time.monotonic() + 10
    while room._next_look == 0 and time.monotonic() < stop:
        time.sleep(0.005)
    time.sleep(0.05)  # gone to sleep till its next look
    room.close()
    assert got, "the stop answers what is parked"
    thread.join(10)
    assert not thread.is_alive(), "a closed room's thread slept on"
    gone = weakref.ref(room)
    del room, signal, got, reader
    gc.collect()
    assert gone() is None, "the closed room was not freed"
