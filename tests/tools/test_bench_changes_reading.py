"""tools/bench/changes_reading.py, changes_read.py's: a read's figures per row, the run-queue
wait of the server's threads among them (the benchmark itself is run by hand, not here)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_bench("changes_reading")


def test_a_reading_gives_the_servers_run_queue_wait_per_row(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = iter([2.0, 2.5])  # seconds waited for a core, at the read's start and end
    cpus = iter([1.0, 1.2])
    monkeypatch.setattr(bench, "runq_seconds", lambda pid: next(waits))
    monkeypatch.setattr(bench.harness, "cpu_seconds", lambda pid: next(cpus))
    reading = bench.Reading.start(1234).end(100_000)
    assert reading.runq_us == pytest.approx(5.0)  # 0.5 s over 100,000 rows
    assert reading.server_us == pytest.approx(2.0)


def test_the_run_queue_wait_of_a_process_is_its_threads_and_only_grows(bench: Any) -> None:
    first = bench.runq_seconds(os.getpid())
    second = bench.runq_seconds(os.getpid())
    assert 0.0 <= first <= second
