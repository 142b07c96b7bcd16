"""tools/bench/subscribe_timeline.py's quantiles of the server's passes: nearest rank, a
pass without a mark (NaN) left out, NaN when no pass has one."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture
def timeline() -> Any:
    return load_bench("subscribe_timeline")


def test_quantiles_are_nearest_rank_without_the_passes_missing_a_mark(timeline: Any) -> None:
    samples = [float(n) for n in range(1, 101)] + [math.nan] * 50
    assert timeline._quantile(samples, 0.5) == 50.0
    assert timeline._quantile(samples, 0.99) == 99.0
    assert timeline._quantile([7.0, math.nan], 0.99) == 7.0


def test_a_quantile_of_no_marked_pass_is_nan(timeline: Any) -> None:
    assert math.isnan(timeline._quantile([math.nan, math.nan], 0.5))
    assert math.isnan(timeline._quantile([], 0.99))


def test_the_hand_off_is_from_the_flush_the_pass_waited_for(timeline: Any) -> None:
    points = {"settle began": 10.0, "settled": 10.5}
    # The flush ended before the wait (at 9) is not the one waited for; the one at 10.2 is.
    assert timeline._handed_off(points, [9.0, 10.2, 10.4]) == pytest.approx(0.3)
    assert math.isnan(timeline._handed_off(points, [9.0, 11.0]))  # durable already: no wait
    assert math.isnan(timeline._handed_off({}, [10.2]))  # a pass that never settled
