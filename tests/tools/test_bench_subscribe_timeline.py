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
