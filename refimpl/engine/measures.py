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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def one_two_five(low: float, high: float) -> tuple[float, ...]:
    """Histogram bounds in seconds: 1, 2.5 and 5 times the powers of ten, from `low` to
    `high` (both of the series) in increasing order. Each bound is the float its decimal
    text reads as (2.5e-4 is 0.00025), so an exported `le` label prints as written."""
    bounds = [
        float(f"{mantissa}e{exponent}")
        for exponent in range(-9, 10)
        for mantissa in ("1", "2.5", "5")
    ]
    return tuple(bound for bound in bounds if low <= bound <= high)


# Upper bounds in seconds: an fsync here takes ~0.1 ms, a commit's append and install tens
# of microseconds, a slow disk hundreds of milliseconds.
LATENCY_BOUNDS: tuple[float, ...] = one_two_five(0.00005, 2.5)


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

    def observe_alone(self, seconds: float) -> None:
        """`observe` for a histogram whose observers never run at once (each holds the one
        lock they share, as a database's commits hold its write lock), without a lock of
        its own (every commit observes one). A snapshot taken meanwhile may count the
        duration in its bucket but not yet in its sum; the next one has both."""
        self._counts[bisect.bisect_left(self._bounds, seconds)] += 1
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


# The kinds of live-query answers counted: a new subscription's whole answer, and the
# difference a commit made.
LIVE_ANSWER_KINDS = ("snapshot", "rows")


@dataclass(frozen=True, slots=True)
class LiveMeasures:
    """The live queries (`GET /api/subscribe`) by database, as of one moment."""

    subscriptions: dict[str, int]  # kept now
    answers: dict[tuple[str, str], int]  # by (database, kind): `snapshot` or `rows`
    reruns: dict[str, int]  # runs of a kept query after a commit touched it

    def of_databases(self, names: Iterable[str]) -> LiveMeasures:
        """These measures for exactly the databases `names`: each with every series, at zero
        where nothing was counted (a counter starts at zero when its database is created),
        and none of a database that is gone (a dropped database's live queries stay kept
        until they expire, but are no longer counted)."""
        names = list(names)
        return LiveMeasures(
            {name: self.subscriptions.get(name, 0) for name in names},
            {
                (name, kind): self.answers.get((name, kind), 0)
                for name in names
                for kind in LIVE_ANSWER_KINDS
            },
            {name: self.reruns.get(name, 0) for name in names},
        )


class LiveCounts:
    """What the live queries count as they answer; thread-safe, a lock and an add a call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str], int] = {}
        self._reruns: dict[str, int] = {}

    def answered(self, database: str, kind: str) -> None:
        """One answer with rows sent: `snapshot` (a new subscription's whole answer) or
        `rows` (the difference a commit made)."""
        key = (database, kind)
        with self._lock:
            self._answers[key] = self._answers.get(key, 0) + 1

    def reran(self, database: str, answered: bool = False) -> None:
        """One run of a query again after a commit; `answered`: it answered rows (counted
        as `answered(database, "rows")` is, in the same hold of the lock)."""
        with self._lock:
            self._reruns[database] = self._reruns.get(database, 0) + 1
            if answered:
                key = (database, "rows")
                self._answers[key] = self._answers.get(key, 0) + 1

    def reran_many(self, database: str, reruns: int, answered: int) -> None:
        """`reruns` runs again, `answered` of which answered rows, counted at once as that
        many `reran` calls count them (a pass of woken live queries': `PassReads`)."""
        with self._lock:
            self._reruns[database] = self._reruns.get(database, 0) + reruns
            if answered:
                key = (database, "rows")
                self._answers[key] = self._answers.get(key, 0) + answered

    def forget_database(self, database: str) -> None:
        """Drop what was counted for `database` (dropped): one created later under its name
        starts at zero."""
        with self._lock:
            self._reruns.pop(database, None)
            for key in [key for key in self._answers if key[0] == database]:
                del self._answers[key]

    def snapshot(self, subscriptions: Mapping[str, int]) -> LiveMeasures:
        with self._lock:
            return LiveMeasures(dict(subscriptions), dict(self._answers), dict(self._reruns))


@dataclass(frozen=True, slots=True)
class EngineMeasures:
    """Every open database's counters and the live queries of the instance."""

    databases: tuple[DatabaseMeasures, ...]
    subscriptions: int
    waiting_subscriptions: int
    live: LiveMeasures


# Why an event stream was sent `reset`, as `kdb_stream_resets_total` labels it.
RESET_REASONS = ("rows_replaced", "lost_place", "copy_restart", "timeout")


@dataclass(frozen=True, slots=True)
class StreamMeasures:
    """The event streams (`GET /stream/changes`), as of one moment."""

    open: dict[str, int]  # open now, by database
    events: dict[tuple[str, str], int]  # sent, by (database, event): change, ready, reset...
    resets: dict[str, int]  # by reason (each of RESET_REASONS)


class StreamCounts:
    """What the event streams count as they take events for sending; thread-safe. A take
    for a group of streams counts its events once for each member it is sent to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[tuple[str, str], int] = {}
        self._resets: dict[str, int] = {}

    def sent(self, database: str, kinds: Mapping[str, int], streams: int = 1) -> None:
        """`kinds`: the events of one take by event name; sent to `streams` streams."""
        with self._lock:
            for kind, count in kinds.items():
                key = (database, kind)
                self._events[key] = self._events.get(key, 0) + count * streams

    def reset(self, reason: str, streams: int = 1) -> None:
        with self._lock:
            self._resets[reason] = self._resets.get(reason, 0) + streams

    def snapshot(self, open_by_database: Mapping[str, int]) -> StreamMeasures:
        with self._lock:
            return StreamMeasures(
                dict(open_by_database),
                dict(self._events),
                {reason: self._resets.get(reason, 0) for reason in RESET_REASONS},
            )


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

    `sent` takes counts its caller kept as it encoded the messages (the protocol core
    counts what it sends); `answered` walks the framed messages of bytes made elsewhere (a
    type byte and a 4-byte length each), a refusal's, say.
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

    def sent(self, size: int, queries: int, errors: Sequence[str]) -> None:
        """Count `size` bytes sent, `queries` statements completed and the errors of these
        SQLSTATEs, when the sender knows them (no walk over the bytes)."""
        with self._lock:
            self._sent += size
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
