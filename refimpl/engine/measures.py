"""What the engine measures for its operators: latency histograms and typed snapshots.

A leaf: it imports nothing of the engine, so the log, a database and the instance can each
keep their own counters here. The engine only counts; a protocol layer (`/metrics`) reads a
snapshot (`Instance.measures()`) when it is asked, so nothing is exported on a hot path.
Counters start at zero when a database is opened; a reader of them takes a drop as a restart.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections.abc import Mapping
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


# The states of a PostgreSQL-protocol connection, as `kdb_pg_connections` labels them.
PG_STATES = ("startup", "idle", "active", "idle_in_transaction", "idle_in_failed_transaction")


@dataclass(frozen=True, slots=True)
class PgMeasures:
    """The PostgreSQL protocol's server, as of one moment."""

    connections: dict[str, int]  # open now, by state (each of PG_STATES)
    queries: int  # statements it completed (a CommandComplete each)
    errors: dict[str, int]  # ErrorResponses sent, by SQLSTATE (FATAL refusals too)
    bytes_received: int
    bytes_sent: int


class PgCounts:
    """What the PostgreSQL protocol's server counts as it answers; `/metrics` reads a
    snapshot. Kept in this leaf because neither protocol layer may import the other.

    `answered` walks the framed messages of an answer (a type byte and a 4-byte length
    each): a quarter of a microsecond a message, next to the microseconds it took to make.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries = 0
        self._errors: dict[str, int] = {}
        self._received = 0
        self._sent = 0

    def received(self, size: int) -> None:
        with self._lock:
            self._received += size

    def answered(self, out: bytes) -> None:
        """Count the statements completed and the errors of `out`, whole messages the
        server sends (or hands over to send once durable)."""
        queries = 0
        errors: list[str] = []
        at, end = 0, len(out)
        while at + 5 <= end:
            kind = out[at]
            (length,) = _LENGTH.unpack_from(out, at + 1)
            if kind == 0x43:  # CommandComplete
                queries += 1
            elif kind == 0x45:  # ErrorResponse
                errors.append(_sqlstate(out, at + 5, at + 1 + length))
            at += 1 + length
        with self._lock:
            self._sent += len(out)
            self._queries += queries
            for code in errors:
                self._errors[code] = self._errors.get(code, 0) + 1

    def snapshot(self, connections: Mapping[str, int]) -> PgMeasures:
        with self._lock:
            return PgMeasures(
                {state: connections.get(state, 0) for state in PG_STATES},
                self._queries,
                dict(self._errors),
                self._received,
                self._sent,
            )


_LENGTH = struct.Struct("!I")


def _sqlstate(out: bytes, at: int, end: int) -> str:
    """The `C` field of the ErrorResponse whose fields are `out[at:end]`."""
    while at < end and out[at] != 0:
        stop = out.find(b"\0", at + 1, end)
        if stop < 0:
            break
        if out[at] == 0x43:
            return out[at + 1 : stop].decode("ascii", "replace")
        at = stop + 1
    return "unknown"
