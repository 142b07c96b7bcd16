"""GET /metrics through a real server, read with prometheus_client's own text parser."""

from __future__ import annotations

import collections
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from refimpl.http.metrics import REQUEST_BOUNDS, RequestCounts
from tests.http.conftest import Server


def scrape(server: Server) -> dict[str, list]:
    """Metric family name -> its samples."""
    response = server.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(response.text)}


def value(families: dict[str, list], sample: str, **labels: str) -> float:
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    found = [
        s.value for s in families[family]
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]  # fmt: skip
    assert len(found) == 1, (sample, labels, families.get(family))
    return found[0]


def test_commits_fsyncs_requests_and_log_are_counted(server: Server, db: str) -> None:
    before = scrape(server)
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    for n in range(3):
        server.sql(f"INSERT INTO t VALUES ({n}, {n})", db)
    server.sql("CHECKPOINT", db)
    assert server.rows("SELECT v FROM t WHERE id = 1", db) == [[1]]
    after = scrape(server)

    assert value(after, "kdb_commit_duration_seconds_count", database=db) == 4
    assert value(after, "kdb_commit_duration_seconds_sum", database=db) > 0
    assert value(after, "kdb_fsync_duration_seconds_count", database=db) >= 4
    assert value(after, "kdb_checkpoints_total", database=db) == 1
    assert value(after, "kdb_log_segments", database=db) >= 1
    assert value(after, "kdb_log_bytes", database=db) > 0
    assert value(after, "kdb_durable_lsn", database=db) == 4
    buckets = [
        s
        for s in after["kdb_commit_duration_seconds"]
        if s.name.endswith("_bucket") and s.labels["database"] == db
    ]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 4

    def exec_count(families: dict[str, list]) -> float:
        return sum(
            s.value
            for s in families.get("kdb_http_requests", [])
            if s.name == "kdb_http_requests_total"
            and s.labels["route"] == "/exec"
            and s.labels["status"] == "200"
        )

    assert exec_count(after) - exec_count(before) == 6
    assert value(after, "kdb_http_request_duration_seconds_count", route="/exec") >= 6
    assert value(after, "kdb_connections") >= 1
    for gauge in ("kdb_waiting_requests", "kdb_open_streams", "kdb_subscriptions"):
        assert value(after, gauge) >= 0


def test_result_cache_hits_and_misses(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 1)", db)
    for _ in range(3):
        server.rows("SELECT count(*) FROM t", db)
    families = scrape(server)
    assert value(families, "kdb_result_cache_misses_total", database=db) >= 1
    assert value(families, "kdb_result_cache_hits_total", database=db) >= 1


def test_errors_and_unknown_paths_are_counted_by_bounded_labels(server: Server) -> None:
    assert server.get("/no/such/path/12345").status_code == 404
    assert server.exec("SELEC 1").status_code == 400
    families = scrape(server)
    routes = {s.labels["route"] for s in families["kdb_http_requests"]}
    assert "unmatched" in routes and not any("12345" in r for r in routes)
    assert (
        value(families, "kdb_http_requests_total", route="/exec", status="400", method="POST") >= 1
    )


def test_a_waiting_reader_is_seen(server: Server, db: str) -> None:
    import threading

    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    asked = {"db": db, "table": "t", "format": "json"}
    lsn = server.get("/api/changes", params=asked).json()["next"]
    waiting = threading.Thread(
        target=server.get,
        args=("/api/changes",),
        kwargs={"params": {**asked, "from": lsn, "wait": 5000}},
    )
    waiting.start()
    try:
        seen = 0.0
        for _ in range(50):
            seen = value(scrape(server), "kdb_waiting_requests")
            if seen >= 1:
                break
            threading.Event().wait(0.05)
        assert seen >= 1
    finally:
        server.sql("INSERT INTO t VALUES (1)", db)
        waiting.join()


@pytest.mark.parametrize("token", [None, "nonadmin"])
def test_metrics_need_the_admin_user(server: Server, db: str, token: str | None) -> None:
    if token is not None:
        server.sql(f"CREATE USER reader_{db}", db)
        server.sql(f"GRANT ADMIN ON DATABASE {db} TO reader_{db}", db)
        token = server.new_token(f"reader_{db}", db)
    response = server.get("/metrics", token=token)
    assert response.status_code == (401 if token is None else 403)
    assert "admin" in response.json()["error"]


def test_openmetrics_when_asked(server: Server) -> None:
    response = server.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_an_open_event_stream_is_counted(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    stream = server.get("/stream/changes", params={"db": db, "table": "t"}, stream=True)
    try:
        assert stream.status_code == 200
        lines = stream.iter_lines()  # kept: a dropped iterator closes the connection
        next(lines)  # the stream is open: its first line came
        seen = 0.0
        for _ in range(50):
            seen = value(scrape(server), "kdb_open_streams")
            if seen >= 1:
                break
            time.sleep(0.05)
        assert seen >= 1
    finally:
        stream.close()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["/exec", "/api/rev"]),
            st.sampled_from([200, 400]),
            st.floats(0, 40, allow_nan=False),
        ),
        max_size=600,
    ),
    st.integers(1, 4),
)
def test_every_request_is_counted_once_in_its_bucket(
    requests: list[tuple[str, int, float]], threads: int
) -> None:
    counts = RequestCounts()
    workers = [
        threading.Thread(target=lambda part=requests[n::threads]: [
            counts.observe(route, "GET", status, seconds) for route, status, seconds in part
        ])
        for n in range(threads)
    ]  # fmt: skip
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    requests_family, latency = counts.metrics()
    by_key = {(s.labels["route"], s.labels["status"]): s.value for s in requests_family.samples}
    assert by_key == dict(collections.Counter((r, str(s)) for r, s, _ in requests))
    for route in {r for r, _, _ in requests}:
        seconds = [d for r, _, d in requests if r == route]
        buckets = {
            s.labels["le"]: s.value
            for s in latency.samples
            if s.name.endswith("_bucket") and s.labels["route"] == route
        }
        assert buckets["+Inf"] == len(seconds)
        for bound in REQUEST_BOUNDS:
            assert buckets[floatToGoString(bound)] == sum(d <= bound for d in seconds)
