"""tools/bench/subscribe_timeline.py's quantiles of the server's passes: nearest rank, a
pass without a mark (NaN) left out, NaN when no pass has one."""

from __future__ import annotations

import math
import sys
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


def test_the_tail_is_the_commits_holding_the_reads_p99(timeline: Any) -> None:
    # 100 commits 0.1 s apart, each 100 reads: the commit at 5.0 late by its flush, the one
    # at 7.0 late in its waiters' reads (arrived as the others did).
    marks, samples = {}, []
    for k in range(100):
        start = k / 10
        durable = 0.030 if k == 50 else 0.004
        marks[start] = {"woken": 0.001, "durable": durable, "last sent": durable + 0.002}
        for n in range(100):
            arrived = durable + 0.00002 * n
            read = arrived + (0.050 if k == 70 else 0.0001)
            samples.append((start + 0.00001, read, arrived))
    figures = timeline.commit_tail(marks, samples)
    assert figures["tail commits"] == 2
    assert figures["durable: median commit"] == pytest.approx(4.0)
    assert figures["last arrived: median commit"] == pytest.approx(4.0 + 1.99, abs=0.02)
    # The median of the two by last read: the flush's (last read 32 ms against 56 ms).
    assert figures["durable: tail commit"] == pytest.approx(30.0)
    assert figures["last read: tail commit"] == pytest.approx(32.1, abs=0.05)
    # One commit's reads in 100 are 1% of them: the p99 (nearest rank) is the others'.
    assert figures["waiters' delay p50 ms"] == pytest.approx(0.1)
    assert figures["waiters' delay p99 ms"] == pytest.approx(0.1)
    assert math.isnan(figures["flushed: tail commit"])  # a mark the commits lack
    assert math.isnan(figures["flushed p99 ms"])
    marks[5.0]["flushed"] = 0.029
    assert timeline.commit_tail(marks, samples)["flushed p99 ms"] == pytest.approx(29.0)


def test_a_run_without_samples_has_no_tail(timeline: Any) -> None:
    figures = timeline.commit_tail({1.0: {"woken": 0.001}}, [])
    assert figures["tail commits"] == 0
    assert math.isnan(figures["woken: tail commit"])
    assert math.isnan(figures["waiters' delay p99 ms"])


def test_the_collectors_time_is_what_falls_within_the_commit(timeline: Any) -> None:
    runs = [[0.5, 1.5, 0], [1.8, 1.9, 2], [3.0, 4.0, 1]]
    assert timeline._overlap(runs, 1.0, 2.0) == pytest.approx(0.6)
    assert timeline._overlap(runs, 2.0, 3.0) == 0.0


def test_both_waiters_compare_on_this_tree_alone(
    timeline: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in (["--threaded-waiters"], ["--before", "elsewhere"]):
        monkeypatch.setattr(sys, "argv", ["subscribe_timeline.py", "--both-waiters", *extra])
        with pytest.raises(SystemExit) as exit_:
            timeline.main()
        assert exit_.value.code == 2
        assert "--both-waiters" in capsys.readouterr().err
