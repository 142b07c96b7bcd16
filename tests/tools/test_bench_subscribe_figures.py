"""tools/bench/subscribe.py's figures and arguments: a stream run whose waiters read no part
has the figures of any stream run (unknown ones NaN), which the comparison of runs reads, and
--threaded-waiters (a way of reading streams) is refused without --stream."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture
def subscribe() -> Any:
    return load_bench("subscribe")


@pytest.fixture
def subscribe_phase() -> Any:
    return load_bench("subscribe_phase")


@pytest.fixture
def report() -> Any:
    return load_bench("subscribe_report")


def test_a_stream_run_without_samples_has_every_stream_figure(
    subscribe_phase: Any, report: Any
) -> None:
    figures = subscribe_phase.latency_figures([([], 0), ([], 0)], last=10.0, stream=True)
    assert figures["n"] == 0
    for key in ("arrival p50", "arrival p99", "last arrival p50"):
        assert math.isnan(figures[key])
    assert "nan" in report.arrived_text(figures)


def test_a_stream_run_gives_its_arrivals(subscribe_phase: Any) -> None:
    gathered = [([(1.0, 0.004, 0.002), (1.0, 0.006, 0.003), (11.0, 0.5, 0.5)], 0)]
    figures = subscribe_phase.latency_figures(gathered, last=10.0, stream=True)
    assert figures["n"] == 2  # the trade after the stop is not counted
    assert figures["arrival p50"] == pytest.approx(2.5, abs=0.6)
    assert figures["last arrival p50"] == pytest.approx(3.0)


def test_long_polls_have_no_arrival_figures(subscribe_phase: Any) -> None:
    figures = subscribe_phase.latency_figures([([(1.0, 0.004, None)], 0)], last=10.0, stream=False)
    assert figures["n"] == 1 and "arrival p50" not in figures


def test_threaded_waiters_without_stream_are_refused(
    subscribe: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["subscribe.py", "--phases", "100", "--threaded-waiters"])
    with pytest.raises(SystemExit) as exit_:
        subscribe.main()
    assert exit_.value.code == 2
    assert "--stream" in capsys.readouterr().err
