"""tools/bench/stream_throughput.py: pair k of `--throughput-only`'s phases is its open phase
over the mean of the none phases before and after it, pinned and not apart, and the pair the
timing tables show is the one whose pinned ratio is the median (the benchmark itself is run
by hand, not here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def throughput() -> Any:
    return load_bench("stream_throughput")


def _phase(rate: float) -> dict[str, Any]:
    return {"run": SimpleNamespace(rate=rate), "server_pct": 50.0, "readers_pct": 0.0}


def _none(rate: float, pinned: float) -> dict[str, Any]:
    return {"none": _phase(rate), "pinned_none": _phase(pinned)}


def _open(rate: float, pinned: float) -> dict[str, Any]:
    return {"open": _phase(rate), "pinned_open": _phase(pinned)}


def test_each_pair_is_over_the_none_phases_around_it(throughput: Any) -> None:
    nones = [_none(1000, 2000), _none(3000, 2200), _none(1000, 1800)]
    opens = [_open(1800, 1890), _open(1500, 1600)]
    pairs = throughput.pair_up(nones, opens)
    assert [pair["ratio"] for pair in pairs] == [0.9, 0.75]
    assert [pair["pinned_ratio"] for pair in pairs] == [0.9, 0.8]
    second = pairs[1]
    assert second["none"] is nones[1]["none"]
    assert second["none_after"] is nones[2]["none"]
    assert second["pinned_none_after"] is nones[2]["pinned_none"]
    assert second["pinned_open"] is opens[1]["pinned_open"]


def test_the_median_pair_is_the_middle_pinned_ratio(throughput: Any) -> None:
    nones = [_none(1000, 1000) for _ in range(4)]
    opens = [_open(500, 900), _open(990, 700), _open(100, 800)]
    pairs = throughput.pair_up(nones, opens)
    assert throughput.median_pair(pairs) is pairs[2]
    # Of an even count, the lower of the two in the middle.
    assert throughput.median_pair(pairs[:2]) is pairs[1]
