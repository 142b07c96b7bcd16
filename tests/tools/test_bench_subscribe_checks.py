"""tools/bench/subscribe.py --phases: the phases that measure one of issue 37's live-query
targets print it as a check line (what `compare.py` gathers): a phase of 100 waiters its
commit-to-rows p99 against 10 ms, saying how many a commit wakes; a phase whose commits each
wake 10 its server CPU a commit against 3 ms; any other phase none."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def report() -> Any:
    return load_bench("subscribe_report")


@pytest.fixture(scope="module")
def subscribe_phase() -> Any:
    return load_bench("subscribe_phase")


def test_a_hundred_streams_all_woken_check_their_p99(report: Any) -> None:
    (check,) = report.phase_checks(100, 100, "streams", 3, 7.7, 3.4)
    assert check.label == "commit-to-rows p99, 100 of 100 streams woken, median of 3 (ms)"
    assert (check.value, check.target, check.met) == (7.7, "< 10 ms", True)
    (check,) = report.phase_checks(100, 100, "streams", 1, 11.4, 3.4)
    assert (check.value, check.met) == (11.4, False)


def test_a_p99_of_trades_missing_or_wrong_is_not_met(report: Any) -> None:
    (check,) = report.phase_checks(100, 100, "streams", 3, 7.7, 3.4, complete=False)
    assert (check.value, check.target, check.met) == (
        7.7,
        "< 10 ms, every trade once, in order",
        False,
    )
    figures = {"n": 10_000, "expected": 10_000, "wrong": 0}
    assert report.whole(figures)
    assert not report.whole({**figures, "n": 9_999})
    assert not report.whole({**figures, "wrong": 1})


def test_ten_long_polls_of_one_symbol_check_the_cpu(report: Any) -> None:
    (check,) = report.phase_checks(10, 10, "long polls", 3, 6.95, 2.5)
    assert check.label == (
        "server CPU per commit waking 10 long polls, 10 subscriptions, median of 3 (ms)"
    )
    assert (check.value, check.target, check.met) == (2.5, "< 3 ms", True)


def test_a_run_without_samples_misses(report: Any) -> None:
    checks = report.phase_checks(100, 10, "streams", 1, math.nan, math.nan)
    assert [check.met for check in checks] == [False, False]


@settings(deadline=None)  # a loaded machine: no time limit on a pure function
@given(
    total=st.integers(min_value=1, max_value=10_000),
    per_symbol=st.integers(min_value=1, max_value=150),
    p99=st.floats(min_value=0, max_value=100),
    cpu_ms=st.floats(min_value=0, max_value=100),
)
def test_each_phase_checks_the_targets_its_shape_measures(
    report: Any, subscribe_phase: Any, total: int, per_symbol: int, p99: float, cpu_ms: float
) -> None:
    checks = {c.target: c for c in report.phase_checks(total, per_symbol, "x", 2, p99, cpu_ms)}
    _, watched, symbols = subscribe_phase.phase_subscriptions(total, per_symbol)
    woken = {watched.count(symbol) for symbol in symbols}
    assert ("< 10 ms" in checks) == (len(watched) == 100)
    assert ("< 3 ms" in checks) == (woken == {10})
    if "< 10 ms" in checks:
        assert (checks["< 10 ms"].value, checks["< 10 ms"].met) == (p99, p99 < 10)
        assert " of 100 x woken, median of 2 " in checks["< 10 ms"].label
    if "< 3 ms" in checks:
        assert (checks["< 3 ms"].value, checks["< 3 ms"].met) == (cpu_ms, cpu_ms < 3)
