"""The fan-out round's split of its poked requests into batches and requests sent alone
(`fanout.split_batches`), and the pokes of a list that waits for its round."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from refimpl.http.error_answers import to_response
from refimpl.waiting.fanout import split_batches
from refimpl.waiting.room import WaitingRoom


def _requests(*batches: object) -> list[Any]:
    return [SimpleNamespace(batch=batch) for batch in batches]


def test_all_in_batches_each_batch_once_in_the_order_first_found_none_alone():
    first, second = object(), object()
    requests = _requests(second, first, second, first)
    batches: dict[Any, None] = {}
    assert split_batches(requests, batches) == []
    assert list(batches) == [second, first]


def test_batches_left_from_the_last_round_stay_first():
    left, poked = object(), object()
    batches: dict[Any, None] = {left: None}
    split_batches(_requests(poked, left), batches)
    assert list(batches) == [left, poked]


def test_requests_no_batch_sends_come_back_in_their_order():
    batch = object()
    requests = _requests(None, batch, None, batch)
    batches: dict[Any, None] = {}
    assert split_batches(requests, batches) == [requests[0], requests[2]]
    assert list(batches) == [batch]
    assert None not in batches


def test_a_list_poked_again_before_its_round_takes_no_lock():
    # The publishing thread pokes a database's streams at each flush: while their list waits
    # for its round it returns at once, the room's lock held elsewhere or not.
    room = WaitingRoom(to_response)
    requests = _requests(object())
    room.poke_all(requests)
    assert room._fanout_groups == [requests]
    with room._lock:
        poking = threading.Thread(target=room.poke_all, args=(requests,))
        poking.start()
        poking.join(5)
        assert not poking.is_alive()
    assert room._fanout_groups == [requests]
    room.close()
