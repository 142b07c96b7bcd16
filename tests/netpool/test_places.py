"""Long places apart (`FifoSlots(..., apart=True)`): a request found costly moves to a long
place beside the ordinary ones and leaves its ordinary place to the next cheap request, so
one ordinary place is enough for the cheap ones never to wait behind a costly one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from refimpl.engine import admission
from refimpl.netpool.places import FifoSlots
from tests.engine.admission_threads import LARGE, WAIT, costly_request, in_thread

BLOCKED = 0.2  # a thread still waiting after this is taken to wait for a place


@pytest.fixture(autouse=True)
def _done() -> Iterator[None]:
    yield
    admission.done()


def waits(fn: Callable[[], object]) -> threading.Thread:
    """`fn` started in a thread, which is checked to wait (the caller ends the wait)."""
    thread, _ = in_thread(fn)
    thread.join(BLOCKED)
    assert thread.is_alive()
    return thread


def test_a_costly_request_leaves_the_one_ordinary_place_to_a_cheap_one() -> None:
    slots = FifoSlots(1, long_places=1, apart=True)
    slots.acquire()
    admission.admitted(slots.release, slots)
    cheap = waits(slots.acquire)  # the one ordinary place is held
    assert admission.before_statements(LARGE, time.monotonic() + WAIT)
    assert not admission.holding()  # on the long place ...
    cheap.join(WAIT)
    assert not cheap.is_alive()  # ... and its ordinary place went to the cheap request
    third = waits(slots.acquire)  # which now holds the one ordinary place
    admission.request_ended()  # the long place goes back: not an ordinary one
    third.join(BLOCKED)
    assert third.is_alive()
    assert slots.to_long(False, 0.0)  # the long place is free again
    slots.release()  # the cheap request ends: its place goes to the third
    third.join(WAIT)
    assert not third.is_alive()


def test_a_second_costly_request_waits_for_the_long_place_and_cheap_ones_never_do() -> None:
    slots = FifoSlots(1, long_places=1, apart=True)
    assert slots.to_long(False, None)  # a costly request runs on the one long place

    second, ok = in_thread(costly_request(slots))
    time.sleep(BLOCKED)
    assert second.is_alive()  # waits for the long place, its ordinary one handed on
    for _ in range(3):  # cheap requests one after another, none behind the costly ones
        cheap, got = in_thread(slots.acquire)
        cheap.join(WAIT)
        assert got == [None]
        slots.release()
    assert second.is_alive()
    slots.release_long()  # the first costly request ends: the second runs
    second.join(WAIT)
    assert ok == [True]
    # Everything given back: one ordinary place and one long place, no more.
    slots.acquire()
    waits(slots.acquire)
    assert slots.to_long(False, 0.0)
    assert not slots.to_long(False, 0.0)


def test_running_long_moves_to_a_free_long_place_else_carries_on_without_one() -> None:
    slots = FifoSlots(1, long_places=1, apart=True)
    slots.acquire()
    admission.admitted(slots.release, slots)
    time.sleep(admission.LONG_SECONDS * 2)
    admission.running_long()
    assert not admission.holding()  # on the long place, its ordinary one free ...
    cheap, got = in_thread(slots.acquire)
    cheap.join(WAIT)
    assert got == [None]  # ... for a cheap request
    admission.admitted(slots.release, slots)  # this thread runs it now: the ordinary place
    time.sleep(admission.LONG_SECONDS * 2)
    began = time.monotonic()
    admission.running_long()  # it may hold an engine lock here: no wait
    assert time.monotonic() - began < WAIT / 2
    assert not admission.holding()  # without a place: the ordinary one went on
    cheap, got = in_thread(slots.acquire)
    cheap.join(WAIT)
    assert got == [None]
