"""The server's metrics for `GET /metrics`, in the Prometheus text format (prometheus_client).

Each `App` has a `ServerMetrics` with a registry of its own (never prometheus_client's global
one), so several servers in one process never share a counter. Two kinds of metric:

- the requests (by route, method and status, and their latency) are counted here as each
  request finishes: they exist only at the HTTP layer;
- everything else is read when a scrape asks (`ServerCollector`), from the engine's typed
  snapshot (`Instance.measures()`) and from counts the server lends (`read_connections`,
  `read_open_streams`): no commit, fsync or read is slowed down to export it.

The metric names and their labels are the ones `spec/operations.md` lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from refimpl.engine.measures import EngineMeasures, HistogramSnapshot

# A request's time in the app: a point read takes ~0.1 ms, a long poll up to its wait.
REQUEST_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                  5.0, 10.0, 30.0)  # fmt: skip

Count = Callable[[], int]


def _none() -> int:
    return 0


class ServerMetrics:
    """The counters of one server; `exposition` renders them for a scrape."""

    def __init__(self, measures: Callable[[], EngineMeasures], waiting: Count) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = Counter(
            "kdb_http_requests", "HTTP requests answered, by route, method and status.",
            ("route", "method", "status"), registry=self.registry,
        )  # fmt: skip
        self._latency = Histogram(
            "kdb_http_request_duration_seconds",
            "Time from a request's whole arrival to its answer (waiting included), by route.",
            ("route",), buckets=REQUEST_BOUNDS, registry=self.registry,
        )  # fmt: skip
        self._collector = ServerCollector(measures, waiting)
        self.registry.register(self._collector)
        # The labelled children by (route, method, status): found by one dictionary lookup
        # instead of `labels()` at every request. Bounded: routes, methods and statuses are.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request. `route` is a route's path, never a client's path."""
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = (self._requests.labels(route, method, str(status)),
                        self._latency.labels(route))  # fmt: skip
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def read_connections(self, count: Count) -> None:
        """Where the open connections are counted (the server lends it when it starts)."""
        self._collector.connections = count

    def read_open_streams(self, count: Count) -> None:
        """Where the open event streams are counted (the event stream lends it)."""
        self._collector.open_streams = count

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics as text, in the format `accept` asks for (Prometheus or OpenMetrics),
        and that format's content type."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class ServerCollector(Collector):
    """Reads the engine's snapshot and the server's counts at each scrape."""

    def __init__(self, measures: Callable[[], EngineMeasures], waiting: Count) -> None:
        self._measures = measures
        self._waiting = waiting
        self.connections: Count = _none
        self.open_streams: Count = _none

    def collect(self) -> Iterator[Metric]:
        engine = self._measures()
        yield from _database_metrics(engine)
        yield _gauge("kdb_subscriptions", "Live queries (GET /api/subscribe) kept.",
                     engine.subscriptions)  # fmt: skip
        yield _gauge("kdb_subscriptions_waiting", "Live queries waiting for a change now.",
                     engine.waiting_subscriptions)  # fmt: skip
        yield _gauge(
            "kdb_waiting_requests",
            "Requests parked without a thread: readers at the end of the change stream,"
            " live queries, writes waiting for their flush.",
            self._waiting(),
        )
        yield _gauge("kdb_open_streams", "Event streams (GET /stream/changes) open now.",
                     self.open_streams())  # fmt: skip
        yield _gauge("kdb_connections", "HTTP client connections open now.", self.connections())


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _database_metrics(engine: EngineMeasures) -> Iterator[Metric]:
    label = ("database",)
    commits = HistogramMetricFamily(
        "kdb_commit_duration_seconds",
        "Commits (the count) and the time each took to log and install under the write lock.",
        labels=label,
    )
    fsyncs = HistogramMetricFamily(
        "kdb_fsync_duration_seconds", "Fsyncs of log files and folders, and their time.",
        labels=label,
    )  # fmt: skip
    log_bytes = GaugeMetricFamily("kdb_log_bytes", "Bytes of the write-ahead log kept.",
                                  labels=label)  # fmt: skip
    segments = GaugeMetricFamily("kdb_log_segments", "Segment files of the write-ahead log.",
                                 labels=label)  # fmt: skip
    durable = GaugeMetricFamily("kdb_durable_lsn", "The last LSN on disk.", labels=label)
    checkpoints = CounterMetricFamily(
        "kdb_checkpoints", "Checkpoints written since the database was opened.", labels=label
    )
    hits = CounterMetricFamily("kdb_result_cache_hits", "SELECTs answered from the result cache.",
                               labels=label)  # fmt: skip
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
    buckets: list[tuple[str, float]] = []
    seen = 0
    for bound, count in zip((*snapshot.bounds, float("inf")), snapshot.counts, strict=True):
        seen += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), seen))
    return buckets, snapshot.total_seconds
