"""A live-query request is woken by the commits that touch it, never by its own parking
(refimpl.http.endpoints.subscribe_route's wake-up, with a real waiting room)."""

from __future__ import annotations

import time

import pytest

from refimpl.http.encode import Answer
from refimpl.http.endpoints.subscribe_route import _Poke
from refimpl.http.error_answers import to_response
from refimpl.waiting.parked import Kind, Parked
from refimpl.waiting.room import WaitingRoom


@pytest.fixture
def room():
    waiting = WaitingRoom(to_response)
    yield waiting
    waiting.close()


def _parked(news: list[bool], attempts: list[int], deadline: float) -> Parked[Answer]:
    def attempt(_: int) -> Answer | None:
        attempts.append(1)
        return Answer(b"rows") if news else None

    return Parked(None, 0, attempt, lambda: Answer(b"none"), deadline, lambda: None, kind=Kind.LIVE)


@pytest.mark.parametrize("woken_before_attach", [True, False])
def test_a_commit_wakes_the_request_whenever_it_comes(room, woken_before_attach):
    news: list[bool] = []
    parked = _parked(news, [], time.monotonic() + 60)
    poke = _Poke(room)
    room.park(parked)
    news.append(True)  # a commit touched what the query reads
    if woken_before_attach:
        poke.set()  # its wake-up came before the route handed the request over
        poke.attach(parked)
    else:
        poke.attach(parked)
        poke.set()
    assert parked.wait().body == b"rows"


def test_parking_alone_does_not_wake_the_room_for_the_request(room):
    attempts: list[int] = []
    parked = _parked([], attempts, time.monotonic() + 0.2)
    room.park(parked)
    _Poke(room).attach(parked)
    assert parked.wait().body == b"none"  # answered at its deadline, never attempted
    assert attempts == []
