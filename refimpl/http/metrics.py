"""The server's metrics for `GET /metrics`, in the Prometheus text format (prometheus_client).

Each `App` has a `ServerMetrics` with a registry of its own (never prometheus_client's global
one), so several servers in one process never share a counter. Two kinds of metric:

- the requests (by route, method and status, and their latency) are counted here as each
  request finishes (`RequestCounts`: a request only queues its figures, folded into plain
  counts now and then and at each scrape): they exist only at the HTTP layer;
- everything else is read when a scrape asks (`ServerCollector`), from the engine's typed
  snapshot (`Instance.measures()`) and from counts the servers lend (`read_connections`,
  `read_open_streams`, `read_pg`): no commit, fsync or read is slowed down to export it.

prometheus_client's own collectors add the process (`process_*`: CPU, memory, open files)
and the interpreter (`python_*`: version, garbage collector). The metric names and their
labels are the ones `spec/operations.md` lists.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import metadata

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from refimpl.engine.measures import (
    EngineMeasures,
    HistogramSnapshot,
    LiveMeasures,
    PgMeasures,
    StreamMeasures,
    one_two_five,
)
from refimpl.engine.replication.lag import SlotLag

# A request's time in the app: a point read takes ~0.1 ms, a long poll up to its wait.
REQUEST_BOUNDS = (*one_two_five(0.0005, 10.0), 30.0)
# Requests queued before the request that queues the next one folds them into the counts.
FOLD_EVERY = 256

Count = Callable[[], int]


def _none() -> int:
    return 0


class RequestCounts:
    """Answered requests by (route, method, status), and their latency by route.

    Counting costs a request one append to a queue: no lock, no metric object. The queue is
    folded into plain counts by one thread at a time, by the request that finds FOLD_EVERY
    queued and at each scrape, so it stays bounded and a scrape sees every request answered
    before it.
    """

    def __init__(self) -> None:
        self._queued: collections.deque[tuple[str, str, int, float]] = collections.deque()
        self._fold_lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = {}
        # Per route: the count of each bucket (REQUEST_BOUNDS, then +Inf) and the sum.
        self._buckets: dict[str, list[int]] = {}
        self._seconds: dict[str, float] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self._queued.append((route, method, status, seconds))
        # Never waits: when another thread folds, it folds this request too.
        if len(self._queued) >= FOLD_EVERY and self._fold_lock.acquire(blocking=False):
            try:
                self._fold()
            finally:
                self._fold_lock.release()

    def metrics(self) -> Iterator[Metric]:
        """The two request metrics, with every request answered so far."""
        with self._fold_lock:
            self._fold()
            requests = CounterMetricFamily(
                "kdb_http_requests",
                "HTTP requests answered, by route, method and status.",
                labels=("route", "method", "status"),
            )
            for (route, method, status), count in sorted(self._requests.items()):
                requests.add_metric((route, method, str(status)), count)
            latency = HistogramMetricFamily(
                "kdb_http_request_duration_seconds",
                "Time from a request's whole arrival to its answer (waiting included), by route.",
                labels=("route",),
            )
            for route, counts in sorted(self._buckets.items()):
                latency.add_metric(
                    (route,), _cumulative(REQUEST_BOUNDS, counts), self._seconds[route]
                )
        yield requests
        yield latency

    def _fold(self) -> None:
        """The queued requests into the counts; the caller holds the fold lock.

        Counted in C over the whole batch (a request costs a few opcodes here, not a loop
        round of its own): the keys and the (route, bucket) pairs by `Counter`, each route's
        seconds summed over its own."""
        take = self._queued.popleft
        batch = [take() for _ in range(len(self._queued))]  # what is queued now; later: next
        if not batch:
            return
        routes, methods, statuses, seconds = zip(*batch, strict=True)
        requests, buckets, seconds_by_route = self._requests, self._buckets, self._seconds
        for key, count in collections.Counter(zip(routes, methods, statuses, strict=True)).items():
            requests[key] = requests.get(key, 0) + count
        # The bucket of each request: le, so a bound itself is counted in its bucket.
        places = map(bisect.bisect_left, itertools.repeat(REQUEST_BOUNDS), seconds)
        for (route, place), count in collections.Counter(zip(routes, places, strict=True)).items():
            counts = buckets.get(route)
            if counts is None:
                counts = buckets[route] = [0] * (len(REQUEST_BOUNDS) + 1)
                seconds_by_route[route] = 0.0
            counts[place] += count
        for route in set(routes):
            seconds_by_route[route] += sum(itertools.compress(seconds, map(route.__eq__, routes)))


class ServerMetrics:
    """The counters of one server; `exposition` renders them for a scrape."""

    def __init__(self, measures: Callable[[], EngineMeasures], waiting: Count) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = RequestCounts()
        # Count one answered request (route, method, status, seconds); the route is a
        # route's path, never a client's path. The counts' own method: no call between.
        self.observe_request: Callable[[str, str, int, float], None] = self._requests.observe
        self._collector = ServerCollector(measures, waiting, self._requests)
        self.registry.register(self._collector)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def read_connections(self, count: Count) -> None:
        """Where the open connections are counted (the server lends it when it starts)."""
        self._collector.connections = count

    def read_open_streams(self, count: Count) -> None:
        """Where the open event streams are counted (the event stream lends it)."""
        self._collector.open_streams = count

    def read_streams(self, measures: Callable[[], StreamMeasures]) -> None:
        """Where the event streams are measured by database and reason (lent at start)."""
        self._collector.streams = measures

    def read_pg(self, measures: Callable[[], PgMeasures]) -> None:
        """Where the PostgreSQL protocol's server is measured (lent when it starts); its
        metrics are there only while it is lent."""
        self._collector.pg = measures

    def read_slots(self, lags: Callable[[], list[SlotLag]]) -> None:
        """Where the replication slots' lag is read (lent when the PostgreSQL port starts)."""
        self._collector.slots = lags

    def describe_build(self, spec: str) -> None:
        """The spec version the server implements, a label of `kdb_build_info`."""
        self._collector.spec = spec

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics as text, in the format `accept` asks for (Prometheus or OpenMetrics),
        and that format's content type."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class ServerCollector(Collector):
    """Reads the engine's snapshot and the server's counts at each scrape."""

    def __init__(
        self, measures: Callable[[], EngineMeasures], waiting: Count, requests: RequestCounts
    ) -> None:
        self._measures = measures
        self._waiting = waiting
        self._requests = requests
        self.connections: Count = _none
        self.open_streams: Count = _none
        self.pg: Callable[[], PgMeasures] | None = None
        self.streams: Callable[[], StreamMeasures] | None = None
        self.slots: Callable[[], list[SlotLag]] | None = None
        self.spec = "unknown"

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily(
            "kdb_build_info",
            "Always 1: the server's version and the spec version it implements.",
            labels=("version", "spec"),
        )
        build.add_metric((_version(), self.spec), 1)
        yield build
        yield from self._requests.metrics()
        engine = self._measures()
        yield from _database_metrics(engine)
        yield _gauge(
            "kdb_subscriptions", "Live queries (GET /api/subscribe) kept.", engine.subscriptions
        )
        yield _gauge(
            "kdb_subscriptions_waiting",
            "Live queries waiting for a change now.",
            engine.waiting_subscriptions,
        )
        yield from _live_metrics(engine.live)
        yield _gauge(
            "kdb_waiting_requests",
            "Requests parked without a thread: readers at the end of the change stream,"
            " live queries, writes waiting for their flush.",
            self._waiting(),
        )
        yield _gauge(
            "kdb_open_streams", "Event streams (GET /stream/changes) open now.", self.open_streams()
        )
        if self.streams is not None:
            yield from _stream_metrics(self.streams())
        yield _gauge("kdb_connections", "HTTP client connections open now.", self.connections())
        if self.pg is not None:
            yield from _pg_metrics(self.pg())
        if self.slots is not None:
            yield from _slot_metrics(self.slots())


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _by_label(
    family: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    documentation: str,
    labels: tuple[str, ...],
    counts: Iterable[tuple[str | tuple[str, ...], float]],
) -> Metric:
    """A family of one sample per (key, count) of `counts`, in their order; a key is the
    labels' values (a tuple), or the one label's value."""
    metric = family(name, documentation, labels=labels)
    for key, count in counts:
        metric.add_metric(key if isinstance(key, tuple) else (key,), count)
    return metric


def _version() -> str:
    try:
        return metadata.version("refimpl")
    except metadata.PackageNotFoundError:
        return "unknown"


def _live_metrics(live: LiveMeasures) -> Iterator[Metric]:
    yield _by_label(
        GaugeMetricFamily,
        "kdb_live_subscriptions",
        "Live queries kept now, by database.",
        ("database",),
        sorted(live.subscriptions.items()),
    )
    yield _by_label(
        CounterMetricFamily,
        "kdb_live_answers",
        "Live-query answers with rows, by database and kind: snapshot (a new subscription's"
        " whole answer) or rows (what a commit changed).",
        ("database", "kind"),
        sorted(live.answers.items()),
    )
    yield _by_label(
        CounterMetricFamily,
        "kdb_live_reruns",
        "Runs of a kept live query after a commit touched what it reads, by database.",
        ("database",),
        sorted(live.reruns.items()),
    )


def _stream_metrics(streams: StreamMeasures) -> Iterator[Metric]:
    yield _by_label(
        GaugeMetricFamily,
        "kdb_streams_open",
        "Event streams open now, by database.",
        ("database",),
        sorted(streams.open.items()),
    )
    yield _by_label(
        CounterMetricFamily,
        "kdb_stream_events_sent",
        "Events the event streams sent, by database and event (change, ready, reset...).",
        ("database", "event"),
        sorted(streams.events.items()),
    )
    yield _by_label(
        CounterMetricFamily,
        "kdb_stream_resets",
        "Resets the event streams sent, by reason: rows_replaced, lost_place, copy_restart,"
        " timeout.",
        ("reason",),
        streams.resets.items(),
    )


def _pg_metrics(pg: PgMeasures) -> Iterator[Metric]:
    yield _by_label(
        GaugeMetricFamily,
        "kdb_pg_connections",
        "PostgreSQL-protocol connections open now, by state.",
        ("state",),
        pg.connections.items(),
    )
    yield CounterMetricFamily(
        "kdb_pg_queries",
        "Statements the PostgreSQL port completed (a CommandComplete each).",
        value=pg.queries,
    )
    yield _by_label(
        CounterMetricFamily,
        "kdb_pg_errors",
        "Errors the PostgreSQL port sent, by SQLSTATE.",
        ("sqlstate",),
        sorted(pg.errors.items()),
    )
    yield CounterMetricFamily(
        "kdb_pg_received_bytes",
        "Bytes the PostgreSQL port read from clients.",
        value=pg.bytes_received,
    )
    yield CounterMetricFamily(
        "kdb_pg_sent_bytes", "Bytes of the PostgreSQL port's answers.", value=pg.bytes_sent
    )


def _slot_metrics(lags: list[SlotLag]) -> Iterator[Metric]:
    labels = ("slot", "database")
    behind = GaugeMetricFamily(
        "kdb_replication_slot_lag_lsns",
        "Durable transactions a replication slot's client has not confirmed whole.",
        labels=labels,
    )
    behind_bytes = GaugeMetricFamily(
        "kdb_replication_slot_lag_bytes",
        "Log bytes of the durable transactions a replication slot's client has not confirmed"
        " whole.",
        labels=labels,
    )
    active = GaugeMetricFamily(
        "kdb_replication_slot_active",
        "1 while a client streams from the replication slot, else 0.",
        labels=labels,
    )
    for lag in lags:
        behind.add_metric((lag.slot, lag.database), lag.lag_lsns)
        behind_bytes.add_metric((lag.slot, lag.database), lag.lag_bytes)
        active.add_metric((lag.slot, lag.database), 1 if lag.active else 0)
    yield behind
    yield behind_bytes
    yield active


def _database_metrics(engine: EngineMeasures) -> Iterator[Metric]:
    label = ("database",)
    commits = HistogramMetricFamily(
        "kdb_commit_duration_seconds",
        "Commits (the count) and the time each took to log and install under the write lock.",
        labels=label,
    )
    fsyncs = HistogramMetricFamily(
        "kdb_fsync_duration_seconds",
        "Fsyncs of log files and folders, and their time.",
        labels=label,
    )
    log_bytes = GaugeMetricFamily(
        "kdb_log_bytes", "Bytes of the write-ahead log kept.", labels=label
    )
    segments = GaugeMetricFamily(
        "kdb_log_segments", "Segment files of the write-ahead log.", labels=label
    )
    durable = GaugeMetricFamily("kdb_durable_lsn", "The last LSN on disk.", labels=label)
    checkpoints = CounterMetricFamily(
        "kdb_checkpoints", "Checkpoints written since the database was opened.", labels=label
    )
    hits = CounterMetricFamily(
        "kdb_result_cache_hits", "SELECTs answered from the result cache.", labels=label
    )
    misses = CounterMetricFamily(
        "kdb_result_cache_misses", "SELECTs the result cache could not answer.", labels=label
    )
    for database in engine.databases:
        name = [database.name]
        commits.add_metric(name, *_buckets(database.commits))
        fsyncs.add_metric(name, *_buckets(database.fsyncs))
        log_bytes.add_metric(name, database.log_bytes)
        segments.add_metric(name, database.log_segments)
        durable.add_metric(name, database.durable_lsn)
        checkpoints.add_metric(name, database.checkpoints)
        hits.add_metric(name, database.cache_hits)
        misses.add_metric(name, database.cache_misses)
    yield from (commits, fsyncs, log_bytes, segments, durable, checkpoints, hits, misses)


def _buckets(snapshot: HistogramSnapshot) -> tuple[list[tuple[str, float]], float]:
    """Cumulative buckets ending in +Inf, and the sum, as Prometheus histograms have them."""
    return _cumulative(snapshot.bounds, snapshot.counts), snapshot.total_seconds


def _cumulative(bounds: Sequence[float], counts: Sequence[int]) -> list[tuple[str, float]]:
    """`counts` per bucket (each bound, then +Inf) as cumulative (le, count) pairs."""
    buckets: list[tuple[str, float]] = []
    seen = 0
    for bound, count in zip((*bounds, float("inf")), counts, strict=True):
        seen += count
        buckets.append((floatToGoString(bound), seen))
    return buckets
