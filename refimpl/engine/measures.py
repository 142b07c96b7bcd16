"""What the engine measures for its operators: latency histograms and typed snapshots.

A leaf: it imports nothing of the engine, so the log, a database and the instance can each
keep their own counters here. The engine only counts; a protocol layer (`/metrics`) reads a
snapshot (`Instance.measures()`) when it is asked, so nothing is exported on a hot path.
Counters start at zero when a database is opened; a reader of them takes a drop as a restart.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

# Upper bounds in seconds: an fsync here takes ~0.1 ms, a commit's append and install tens
# of microseconds, a slow disk hundreds of milliseconds.
LATENCY_BOUNDS: tuple[float, ...] = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Observations by bucket: `counts[i]` fell at or under `bounds[i]` and over the bound
    before it; the last count (one more than there are bounds) is over every bound."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total_seconds: float

    @property
    def count(self) -> int:
        return sum(self.counts)


class LatencyHistogram:
    """Durations counted into fixed buckets; thread-safe, a few hundred nanoseconds a call."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._total = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        index = bisect.bisect_left(self._bounds, seconds)
        with self._lock:
            self._counts[index] += 1
            self._total += seconds

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            return HistogramSnapshot(self._bounds, tuple(self._counts), self._total)


@dataclass(frozen=True, slots=True)
class DatabaseMeasures:
    """One open database's counters, as of one moment."""

    name: str
    commits: HistogramSnapshot  # each commit's log append and install, under the write lock
    fsyncs: HistogramSnapshot  # each fsync of a log file or folder
    log_bytes: int
    log_segments: int
    durable_lsn: int
    checkpoints: int  # written since the database was opened
    cache_hits: int
    cache_misses: int


@dataclass(frozen=True, slots=True)
class EngineMeasures:
    """Every open database's counters and the live queries of the instance."""

    databases: tuple[DatabaseMeasures, ...]
    subscriptions: int
    waiting_subscriptions: int
