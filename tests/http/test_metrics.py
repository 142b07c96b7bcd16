"""GET /metrics through a real server, read with prometheus_client's own text parser."""

from __future__ import annotations

import collections
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from conformance.cli import shipped_spec_version
from refimpl.engine.instance import Instance
from refimpl.engine.measures import PG_STATES, PgCounts
from refimpl.http.metrics import REQUEST_BOUNDS, RequestCounts
from refimpl.pgwire import messages as m
from refimpl.pgwire.serving import PgOptions
from refimpl.pgwire.serving import PgServer as PgServing
from tests.http.conftest import ROOT, Server, running_server
from tests.http.stream_client import open_stream
from tests.pgwire.attack import (
    connect_from,
    error_fields,
    pg_server,
    read_until_closed,
    startup_packet,
)
from tests.pgwire.conftest import PgServer, pg_address


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


def _value_or_zero(families: dict[str, list], sample: str, **labels: str) -> float:
    family = families.get(sample.removesuffix("_total"), [])
    found = [
        s.value for s in family
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]  # fmt: skip
    return found[0] if found else 0.0


def test_event_streams_are_counted_by_database_event_and_reset_reason(
    server: Server, db: str
) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    before = scrape(server)
    stream = open_stream(server, db, table=["t"])
    behind = None
    try:
        assert [e["event"] for e in stream.take(1)] == ["ready"]
        server.sql("INSERT INTO t VALUES (1), (2)", db)
        server.sql("TRUNCATE t", db)
        events = stream.take(4)
        assert [e["event"] for e in events] == ["change", "change", "reset", "ready"]
        # A resume from an id past the log: the stream lost its place.
        behind = open_stream(server, db, table=["t"], headers={"Last-Event-ID": "9999"})
        assert [e["event"] for e in behind.take(2)] == ["reset", "ready"]
        after = scrape(server)
        assert value(after, "kdb_streams_open", database=db) == 2
    finally:
        stream.close()
        if behind is not None:
            behind.close()

    def grew(sample: str, **labels: str) -> float:
        return _value_or_zero(after, sample, **labels) - _value_or_zero(before, sample, **labels)

    assert grew("kdb_stream_events_sent_total", database=db, event="change") == 2
    assert grew("kdb_stream_events_sent_total", database=db, event="ready") == 3
    assert grew("kdb_stream_events_sent_total", database=db, event="reset") == 2
    assert grew("kdb_stream_resets_total", reason="rows_replaced") == 1
    assert grew("kdb_stream_resets_total", reason="lost_place") == 1
    reasons = {s.labels["reason"] for s in after["kdb_stream_resets"]}
    assert reasons == {"rows_replaced", "lost_place", "copy_restart", "timeout"}


def test_live_queries_are_counted_by_database(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 1)", db)

    def subscribe(ident: str | None = None, wait: int = 0) -> tuple[str, str]:
        """(the answer's id, its event name) of one request."""
        params = {"query": "SUBSCRIBE SELECT id, v FROM t", "db": db, "wait": str(wait)}
        if ident is not None:
            params["id"] = ident
        response = server.get("/api/subscribe", params=params, timeout=30)
        assert response.status_code == 200, response.text
        fields = dict(line.split(": ", 1) for line in response.text.splitlines() if ": " in line)
        return fields["id"], fields.get("event", "")

    ident, kind = subscribe()
    assert kind == "snapshot"
    writer = threading.Timer(0.3, lambda: server.sql("INSERT INTO t VALUES (2, 2)", db))
    writer.start()
    _, kind = subscribe(ident, wait=10_000)
    writer.join()
    assert kind == "rows"
    families = scrape(server)
    assert value(families, "kdb_live_subscriptions", database=db) == 1
    assert value(families, "kdb_live_answers_total", database=db, kind="snapshot") == 1
    assert value(families, "kdb_live_answers_total", database=db, kind="rows") == 1
    assert value(families, "kdb_live_reruns_total", database=db) >= 1


def test_live_series_start_at_zero_with_their_database_and_go_with_it(
    server: Server, db: str
) -> None:
    def live_series(families: dict[str, list]) -> dict[str, float]:
        return {
            sample.name + "".join(f",{k}={v}" for k, v in sorted(sample.labels.items())): (
                sample.value
            )
            for family in ("kdb_live_subscriptions", "kdb_live_answers", "kdb_live_reruns")
            for sample in families[family]
            if sample.labels["database"] == db and not sample.name.endswith("_created")
        }

    zeros = {
        f"kdb_live_subscriptions,database={db}": 0.0,
        f"kdb_live_answers_total,database={db},kind=rows": 0.0,
        f"kdb_live_answers_total,database={db},kind=snapshot": 0.0,
        f"kdb_live_reruns_total,database={db}": 0.0,
    }
    assert live_series(scrape(server)) == zeros  # counters start at zero with the database
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    response = server.get(
        "/api/subscribe", params={"query": "SUBSCRIBE SELECT id FROM t", "db": db}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert live_series(scrape(server))[f"kdb_live_subscriptions,database={db}"] == 1
    server.sql(f"DROP DATABASE {db}")
    assert live_series(scrape(server)) == {}  # its kept live query is no longer counted
    server.sql(f"CREATE DATABASE {db}")
    assert live_series(scrape(server)) == zeros  # a new database of the name starts at zero


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

    def observe_all(part: list[tuple[str, int, float]]) -> None:
        for route, status, seconds in part:
            counts.observe(route, "GET", status, seconds)

    workers = [
        threading.Thread(target=observe_all, args=(requests[n::threads],)) for n in range(threads)
    ]
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


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with running_server(tmp_path_factory.mktemp("pgmetrics") / "data", "--pg-port", "0") as running:
        yield PgServer(running, *pg_address(running))


@pytest.fixture
def pgdb(pg: PgServer) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    return name


def spec_families() -> dict[str, str]:
    """The metric families spec/operations.md lists (name without `_total`) -> their type."""
    chapter = (ROOT / "spec" / "operations.md").read_text()
    table = chapter.split("## GET /metrics", 1)[1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for row in re.findall(r"(?m)^\| (`[^|]+) \|\s*(\w*)\s*\|", table):
        names, kind = row
        for name in re.findall(r"`([a-z_]+)`", names):
            found[name.removesuffix("_total")] = kind
    return found


def test_every_family_the_spec_lists_is_scraped_with_its_type(pg: PgServer, pgdb: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", pgdb)
    pg.http.sql("INSERT INTO t VALUES (1)", pgdb)  # a database with a commit
    with pg.connect(pgdb) as conn:
        conn.execute("SELECT 1").fetchall()
    response = pg.http.get("/metrics")
    assert response.status_code == 200
    scraped = {f.name: f for f in text_string_to_metric_families(response.text)}
    listed = spec_families()
    assert len(listed) >= 23 and "kdb_pg_connections" in listed and "kdb_build_info" in listed
    for name, kind in listed.items():
        assert name in scraped, f"{name} is in the spec, not in the scrape"
        if kind:
            assert scraped[name].type == kind, (name, scraped[name].type)


def test_process_python_and_build_info(server: Server) -> None:
    families = scrape(server)
    assert value(families, "process_cpu_seconds_total") > 0
    assert value(families, "process_resident_memory_bytes") > 10_000_000
    assert value(families, "process_open_fds") >= 3
    assert value(families, "process_start_time_seconds") > time.time() - 3600
    python = families["python_info"][0]
    assert python.labels["implementation"] == "CPython" and python.value == 1
    assert "python_gc_objects_collected" in families
    build = families["kdb_build_info"]
    assert len(build) == 1 and build[0].value == 1
    assert build[0].labels["spec"] == shipped_spec_version()
    assert re.fullmatch(r"\d+\.\d+.*", build[0].labels["version"])


def test_no_postgresql_metrics_without_the_postgresql_port(server: Server) -> None:
    assert not [name for name in scrape(server) if name.startswith("kdb_pg_")]


def test_postgresql_connections_queries_errors_and_bytes(pg: PgServer, pgdb: str) -> None:
    other = pgdb + "_b"  # a transaction holds its database: the failed one gets its own
    pg.http.sql(f"CREATE DATABASE {other}")
    before = scrape(pg.http)
    idle = pg.connect(pgdb)
    busy = pg.connect(pgdb, autocommit=False)
    failed = pg.connect(other, autocommit=False)
    try:
        for n in range(3):
            assert idle.execute(f"SELECT {n}").fetchall() == [(n,)]
        with pytest.raises(psycopg.errors.SyntaxError):
            idle.execute("SELEC 1")
        busy.execute("SELECT 1").fetchall()  # psycopg opened a transaction: it stays open
        failed.execute("SELECT 1").fetchall()
        with pytest.raises(psycopg.errors.UndefinedTable):
            failed.execute("SELECT * FROM no_such_table")
        with pytest.raises(psycopg.OperationalError):
            pg.connect(pgdb, password="not-the-token")  # a refused login is counted too
        after = scrape(pg.http)
    finally:
        for conn in (idle, busy, failed):
            conn.close()

    states = {s.labels["state"]: s.value for s in after["kdb_pg_connections"]}
    assert set(states) == set(PG_STATES)
    assert states["idle"] >= 1 and states["idle_in_transaction"] >= 1
    assert states["idle_in_failed_transaction"] >= 1

    def errors(families: dict[str, list], code: str) -> float:
        found = [
            s.value
            for s in families.get("kdb_pg_errors", [])
            if s.name == "kdb_pg_errors_total" and s.labels["sqlstate"] == code
        ]
        return found[0] if found else 0.0

    assert errors(after, "42601") - errors(before, "42601") == 1
    assert errors(after, "42P01") - errors(before, "42P01") == 1
    assert errors(after, "28P01") - errors(before, "28P01") == 1
    queries = value(after, "kdb_pg_queries_total") - value(before, "kdb_pg_queries_total")
    assert queries >= 5  # three SELECTs and two more; the drivers' own statements count too
    for counter in ("kdb_pg_received_bytes_total", "kdb_pg_sent_bytes_total"):
        assert value(after, counter) - value(before, counter) > 100

    # The connections closed: none is counted any more, once the server has seen them go.
    for _ in range(100):
        left = sum(s.value for s in scrape(pg.http)["kdb_pg_connections"])
        if left == 0:
            break
        time.sleep(0.05)
    assert left == 0


def test_postgresql_copy_data_counts_as_received(pg: PgServer, pgdb: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", pgdb)
    before = value(scrape(pg.http), "kdb_pg_received_bytes_total")
    payload = "".join(f"{n}\t{'x' * 100}\n" for n in range(2000)).encode()
    with pg.connect(pgdb) as conn, conn.cursor() as cursor:
        with cursor.copy("COPY t FROM STDIN") as copy:
            copy.write(payload)
    assert pg.http.rows("SELECT count(*) FROM t", pgdb) == [[2000]]
    assert value(scrape(pg.http), "kdb_pg_received_bytes_total") - before >= len(payload)


def test_answers_are_counted_by_their_messages() -> None:
    counts = PgCounts()
    # Values full of the bytes that start a CommandComplete and an ErrorResponse: only the
    # messages' own types count.
    rows = m.DataRows([(n, "CE" * 20) for n in range(50)], (_text, _text)).encode()
    counts.answered(
        m.RowDescription(()).encode()
        + rows
        + m.CommandComplete("SELECT 50").encode()
        + m.ErrorResponse("22012", "division by zero", position=8).encode()
        + m.ErrorResponse("00000", "a notice", "NOTICE", notice=True).encode()
        + m.ReadyForQuery("I").encode()
    )
    counts.answered(m.ErrorResponse("53300", "too many", "FATAL").encode())
    counts.received(7)
    seen = counts.snapshot({"idle": 2})
    assert seen.queries == 1 and seen.errors == {"22012": 1, "53300": 1}
    assert seen.bytes_received == 7 and seen.bytes_sent > 50 * 45
    assert seen.connections == {state: 2 if state == "idle" else 0 for state in PG_STATES}


def _text(value: object) -> bytes:
    return str(value).encode()


def test_postgresql_refusals_before_login_are_counted(tmp_path: Path) -> None:
    limits = {"pg_max_unauthenticated_per_address": 2, "pg_login_timeout_s": 1.0}
    with pg_server(tmp_path, **limits) as pg:
        before = scrape(pg.http)
        silent = [connect_from("127.0.0.3", pg.port) for _ in range(5)]
        try:
            codes = sorted(error_fields(read_until_closed(s))["C"] for s in silent)
        finally:
            for sock in silent:
                sock.close()
        # Three over the per-address cap at once, two at the login timeout.
        assert codes == ["53300"] * 3 + ["57014"] * 2
        after = scrape(pg.http)

    def grew(code: str) -> float:
        return _value_or_zero(after, "kdb_pg_errors_total", sqlstate=code) - _value_or_zero(
            before, "kdb_pg_errors_total", sqlstate=code
        )

    assert grew("53300") == 3 and grew("57014") == 2


def test_postgresql_connections_ended_at_stop_are_counted(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    server = PgServing(instance, PgOptions(port=0, threads=2))
    server.start()
    try:
        sock = socket.create_connection(server.address, timeout=10)
        sock.sendall(startup_packet("admin", "demo"))
        assert sock.recv(9)[:1] == b"R"  # it waits for its password: a connection the stop ends
        server.stop()
        assert error_fields(read_until_closed(sock))["C"] == "57P01"
        sock.close()
    finally:
        instance.close()
    assert server.answers.snapshot({}).errors == {"57P01": 1}
