"""The fan-out round's split of its poked requests into batches and requests sent alone
(`fanout.split_batches`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from refimpl.waiting.fanout import split_batches


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
