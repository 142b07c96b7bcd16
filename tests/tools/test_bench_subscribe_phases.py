"""tools/bench/subscribe.py's phases (subscribe_phase.py) keep what they say: a phase of N
subscriptions makes N, min(N, 100) of them waiting and the rest idle on symbols no commit
touches, and each commit wakes the waiters of one watched symbol."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def subscribe_phase() -> Any:
    return load_bench("subscribe_phase")


def test_ten_is_ten_waiters_of_one_symbol(subscribe_phase: Any) -> None:
    idle, watched, symbols = subscribe_phase.phase_subscriptions(10, 10)
    assert idle == []
    assert watched == [symbols[0]] * 10 and len(symbols) == 1


def test_a_hundred_and_ten_thousand_keep_their_documented_shapes(subscribe_phase: Any) -> None:
    idle, watched, symbols = subscribe_phase.phase_subscriptions(100, 10)
    assert idle == [] and len(watched) == 100 and len(symbols) == 10
    idle, watched, symbols = subscribe_phase.phase_subscriptions(10_000, 10)
    assert len(idle) == 9_900 and len(watched) == 100
    idle, watched, symbols = subscribe_phase.phase_subscriptions(100, 100)
    assert watched == [symbols[0]] * 100


@settings(deadline=None)  # a loaded machine: no time limit on a pure function
@given(
    total=st.integers(min_value=1, max_value=10_000),
    per_symbol=st.integers(min_value=1, max_value=150),
)
def test_a_phase_keeps_its_total(subscribe_phase: Any, total: int, per_symbol: int) -> None:
    idle, watched, symbols = subscribe_phase.phase_subscriptions(total, per_symbol)
    assert len(idle) + len(watched) == total
    assert len(watched) == min(total, 100)
    assert set(watched) == set(symbols) and not set(idle) & set(symbols)
    woken = sorted(watched.count(symbol) for symbol in symbols)
    assert woken[-1] - woken[0] <= 1  # spread evenly
    if len(watched) % per_symbol == 0 and len(watched) // per_symbol <= 10:
        assert woken == [per_symbol] * len(symbols)
