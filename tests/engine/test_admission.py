"""The admission rule: costly requests hold at most the long places, cheap ones the rest."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from refimpl.engine import admission
from refimpl.netpool.places import FifoSlots
from tests.engine.admission_threads import LARGE, WAIT, costly_request, in_thread


@pytest.fixture(autouse=True)
def _done() -> Iterator[None]:
    yield
    admission.done()


def test_without_a_server_the_hooks_do_nothing() -> None:
    assert admission.before_statements(LARGE, None)
    admission.running_long()
    admission.waiting()
    assert not admission.holding()


def test_a_large_text_runs_on_a_long_place_and_its_place_goes_to_a_cheap_request() -> None:
    slots = FifoSlots(2, long_places=1)
    slots.acquire()
    admission.admitted(slots.release, slots)
    slots.acquire()  # the other place: a cheap request
    assert admission.before_statements(LARGE, time.monotonic() + WAIT)
    assert not admission.holding()  # on a long place, not an ordinary one
    # The long place was the caller's own: nothing is free, a third request waits.
    waiter, got = in_thread(slots.acquire)
    waiter.join(0.2)
    assert waiter.is_alive()
    admission.request_ended()  # the long place goes back: to the waiting cheap request
    waiter.join(WAIT)
    assert not waiter.is_alive() and got == [None]


def test_a_second_costly_request_waits_while_cheap_ones_keep_a_place() -> None:
    slots = FifoSlots(2, long_places=1)
    assert slots.to_long(False, None)  # a costly request runs on the one long place

    second, ok = in_thread(costly_request(slots))
    time.sleep(0.2)
    assert second.is_alive()  # waits for the long place, its ordinary one handed on
    cheap, got = in_thread(slots.acquire)
    cheap.join(WAIT)
    assert got == [None]  # a cheap request is not behind the costly one
    slots.release()
    slots.release_long()
    second.join(WAIT)
    assert ok == [True]


def test_the_wait_counts_against_the_deadline() -> None:
    slots = FifoSlots(2, long_places=1)
    assert slots.to_long(False, None)
    slots.acquire()
    admission.admitted(slots.release, slots)
    began = time.monotonic()
    assert not admission.before_statements(LARGE, time.monotonic() + 0.2)
    assert time.monotonic() - began < WAIT
    assert not admission.holding()
    slots.acquire()  # its place was handed on, and is free again
    slots.release_long()


def test_running_long_takes_a_free_long_place_and_remembers_the_shape() -> None:
    slots = FifoSlots(2, long_places=1)
    slots.acquire()
    admission.admitted(slots.release, slots)
    text = "SELECT count(*) FROM big WHERE name LIKE '%7%3%'"
    assert admission.before_statements(text, None)  # not known to be costly yet
    assert admission.holding()
    admission.running_long()
    assert admission.holding()  # not long yet: keeps its place
    time.sleep(admission.LONG_SECONDS * 2)
    admission.running_long()
    assert not admission.holding()  # on the long place now
    admission.request_ended()
    slots.acquire()
    slots.acquire()  # both places are free again
    slots.release()
    admission.admitted(slots.release, slots)
    assert admission.before_statements(text, None)  # remembered: straight to a long place
    assert not admission.holding()
    admission.request_ended()
    slots.acquire()
    admission.admitted(slots.release, slots)
    # The same shape with other constants is as costly: it too goes straight to a long place.
    assert admission.before_statements(text.replace("'%7%3%'", "'%1%2%'"), None)
    assert not admission.holding()
    admission.request_ended()


def test_texts_that_differ_only_in_constants_have_one_shape() -> None:
    shape = admission.statement_shape
    assert shape("SELECT * FROM t WHERE id = 1") == shape("SELECT * FROM t WHERE id = 22")
    assert shape("SELECT 'it''s' FROM t") == shape("SELECT 'x' FROM t")
    assert shape("SELECT 1.5e3 FROM t") == shape("SELECT 2 FROM t")
    assert shape("SELECT c1 FROM t") != shape("SELECT c2 FROM t")  # names are not constants
    assert shape("SELECT * FROM t") != shape("SELECT * FROM u")


def test_running_long_never_waits_when_the_long_places_are_taken() -> None:
    slots = FifoSlots(2, long_places=1)
    assert slots.to_long(False, None)
    slots.acquire()
    admission.admitted(slots.release, slots)
    time.sleep(admission.LONG_SECONDS * 2)
    began = time.monotonic()
    admission.running_long()  # it may hold an engine lock here: no wait
    assert time.monotonic() - began < 1.0
    assert not admission.holding()  # carries on without a place
    slots.acquire()  # the place it handed on
    slots.release_long()


def test_open_all_lets_every_waiter_run() -> None:
    slots = FifoSlots(2, long_places=1)
    assert slots.to_long(False, None)
    slots.acquire()
    long_waiter, ok = in_thread(lambda: slots.to_long(False, None))
    waiter, got = in_thread(slots.acquire)
    time.sleep(0.1)
    slots.open_all()
    long_waiter.join(WAIT)
    waiter.join(WAIT)
    assert ok == [True] and got == [None]


def test_a_costly_statement_after_the_place_went_on_runs_without_one() -> None:
    # A protocol client's pipeline: a commit's wait handed the request's place on, and the
    # workers polling idle keep every place; a costly statement later in the same request
    # must not wait for a place that never comes (it waited out the statement timeout).
    slots = FifoSlots(2, long_places=1)
    slots.acquire()
    admission.admitted(slots.release, slots)
    admission.waiting()  # the commit's flush: the place goes on ...
    slots.acquire()  # ... to an idle worker, which keeps it while it polls
    slots.acquire()  # and the other place is held by another idle worker
    began = time.monotonic()
    assert admission.before_statements(LARGE, time.monotonic() + WAIT)
    assert time.monotonic() - began < WAIT / 2
    assert not admission.holding()
