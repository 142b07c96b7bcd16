"""No SQL text or value can stop the server, poison a table or outrun the statement timeout.

Each test sends what an outside review found against a real server: a backtracking LIKE,
SQL too long or nested too deep, values outside their type's range by every way in, and
statements past the statement timeout. Each answer must be a clear 400, nothing committed
may change, `/health` must answer meanwhile, and the server log must hold no traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import Server, running_server

HEALTH_BOUND = 2.0  # seconds: a liveness check, generous on a loaded machine


def assert_no_traceback(server: Server) -> None:
    log = server.log.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert "RecursionError" not in log, log[-3000:]


def assert_400(response: requests.Response, pattern: str) -> str:
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert pattern.lower() in error.lower(), error
    return error


def answer_while_healthy(server: Server, send: object) -> requests.Response:
    """Run `send()` in a thread; /health must answer while it runs (or once it is done)."""
    answers: list[requests.Response] = []
    worker = threading.Thread(target=lambda: answers.append(send()))  # type: ignore[operator]
    worker.start()
    health = server.get("/health", timeout=HEALTH_BOUND)
    assert health.status_code == 200
    worker.join(60)
    assert answers, "the request did not come back"
    return answers[0]


def make_table(server: Server, db: str) -> None:
    server.sql(
        "CREATE TABLE t (id INT PRIMARY KEY, b BIGINT, d DOUBLE, ts TIMESTAMP, s STRING)", db
    )
    server.sql(
        "INSERT INTO t VALUES (1, 10, 1.5, '2026-01-01T00:00:00Z',"
        " 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!')",
        db,
    )


EXPECTED = [[1, 10, 1.5, "2026-01-01T00:00:00.000Z", "a" * 40 + "!"]]


# -- finding 1: LIKE and other one-call computations --------------------------------------


def test_backtracking_like_pattern_answers_at_once(server: Server, db: str):
    make_table(server, db)
    pattern = "%a" * 22 + "%b"
    response = answer_while_healthy(
        server, lambda: server.exec(f"SELECT s LIKE '{pattern}' AS m FROM t", db)
    )
    assert response.status_code == 200, response.text
    assert response.json()["dataset"] == [[False]]
    deleted = server.exec(f"DELETE FROM t WHERE s LIKE '{pattern * 50}'", db)
    assert deleted.json()["count"] == 0
    assert server.rows("SELECT * FROM t", db) == EXPECTED
    assert_no_traceback(server)


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT round(1.5, 400) AS x", "round()"),
        ("SELECT round(1.5, -400) AS x", "round()"),
        ("SELECT 9223372036854775807 * 9223372036854775807 AS x", "out of range for BIGINT"),
        ("SELECT 1e308 * 1e308 AS x", "out of range for DOUBLE"),
        ("SELECT CAST('" + "9" * 5000 + "' AS BIGINT) AS x", "cannot cast"),
        ("SELECT " + "9" * 5000 + " AS x", "digits"),
        ("SELECT 1e400 AS x", "too large for a DOUBLE"),
    ],
)
def test_unbounded_computations_are_refused(server: Server, db: str, sql: str, says: str):
    response = answer_while_healthy(server, lambda: server.exec(sql, db))
    assert_400(response, says)
    assert_no_traceback(server)


# -- finding 3: SQL size, list lengths and nesting ----------------------------------------


def test_sql_longer_than_max_sql_bytes(server: Server, db: str):
    make_table(server, db)
    items = ",".join(str(i) for i in range(300_000))  # about 2 MB
    response = answer_while_healthy(
        server, lambda: server.exec(f"DELETE FROM t WHERE id IN ({items})", db)
    )
    assert_400(response, "max_sql_bytes")
    assert server.rows("SELECT * FROM t", db) == EXPECTED
    assert_no_traceback(server)


def test_in_list_and_values_rows_are_bounded(server: Server, db: str):
    make_table(server, db)
    items = ",".join(str(i) for i in range(10_001))
    assert_400(server.exec(f"DELETE FROM t WHERE id IN ({items})", db), "IN list")
    rows = ",".join(f"({i})" for i in range(2, 100_003))
    assert_400(server.exec(f"INSERT INTO t (id) VALUES {rows}", db), "VALUES rows")
    assert server.rows("SELECT * FROM t", db) == EXPECTED
    assert_no_traceback(server)


@pytest.mark.parametrize(
    "condition",
    [
        "NOT " * 1000 + "true",
        "+".join(["1"] * 1000) + " = 1000",
        " AND ".join(["id = 1"] * 1000),
        "abs(" * 1000 + "id" + ")" * 1000 + " = 1",
        "- " * 1000 + "id = 1",
    ],
    ids=["not", "plus", "and", "abs", "minus"],
)
def test_deep_nesting_is_a_clear_400(server: Server, db: str, condition: str):
    make_table(server, db)
    for sql in (
        f"SELECT id FROM t WHERE {condition}",
        f"DELETE FROM t WHERE {condition}",
        f"UPDATE t SET b = 1 WHERE {condition}",
    ):
        response = answer_while_healthy(server, lambda sql=sql: server.exec(sql, db))
        assert_400(response, "nested deeper than")
    assert server.rows("SELECT * FROM t", db) == EXPECTED
    assert_no_traceback(server)


def test_nesting_within_the_limit_runs(server: Server, db: str):
    make_table(server, db)
    condition = " OR ".join(["id = 1"] * 150)
    assert server.rows(f"SELECT id FROM t WHERE {condition}", db) == [[1]]
    assert server.rows("SELECT " + "abs(" * 150 + "id" + ")" * 150 + " FROM t", db) == [[1]]


# -- finding 4: no value outside its type's range is stored -------------------------------


def assert_table_readable(server: Server, db: str, expected: list[list]) -> None:
    assert server.rows("SELECT * FROM t", db) == expected
    assert server.get("/exp", params={"db": db, "query": "SELECT * FROM t"}).status_code == 200
    changes = server.get("/api/changes", params={"db": db, "table": "t", "format": "json"})
    assert changes.status_code == 200, changes.text
    assert server.exec("SELECT * FROM changes('t')", db).status_code == 200


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("INSERT INTO t (id, ts) VALUES (2, 9000000000000000000)", "out of range for TIMESTAMP"),
        ("INSERT INTO t (id, ts) VALUES (2, now() + 9223372036854775807)", "TIMESTAMP"),
        ("INSERT INTO t (id, ts) VALUES (2, '9999-12-31T23:00:00-05:00')", "TIMESTAMP"),
        ("INSERT INTO t (id, ts) VALUES (2, CAST(-99999999999999999 AS TIMESTAMP))", "TIMESTAMP"),
        ("INSERT INTO t (id, b) VALUES (2, 18446744073709551617)", "out of range for BIGINT"),
        ("INSERT INTO t (id, d) VALUES (2, 18446744073709551617)", "out of range for BIGINT"),
        ("INSERT INTO t (id, d) VALUES (2, CAST('nan' AS DOUBLE))", "out of range for DOUBLE"),
        ("INSERT INTO t (id) VALUES (2147483648)", "out of range for INT"),
        ("UPDATE t SET ts = ts + 9223372036854775807", "TIMESTAMP"),
        ("UPDATE t SET id = id + 2147483647", "out of range for INT"),
        ("UPDATE t SET b = b * 9223372036854775807", "out of range for BIGINT"),
    ],
)
def test_out_of_range_values_are_refused_in_sql(server: Server, db: str, sql: str, says: str):
    make_table(server, db)
    assert_400(server.exec(sql, db), says)
    assert_table_readable(server, db, EXPECTED)
    assert_no_traceback(server)


@pytest.mark.parametrize(
    ("precision", "line"),
    [
        ("s", "t,s=B d=2.5 9000000000000"),
        ("u", "t,s=B d=2.5 9000000000000000000"),
        ("ms", "t,s=B d=2.5 -9000000000000000"),
        ("n", "t,s=B d=2.5 " + "9" * 5000),
        ("n", "t,s=B b=" + "9" * 5000 + "i"),
    ],
)
def test_write_refuses_values_outside_their_range(
    server: Server, db: str, precision: str, line: str
):
    server.sql("CREATE TABLE t (s SYMBOL, d DOUBLE, b BIGINT, timestamp TIMESTAMP)", db)
    server.sql("INSERT INTO t VALUES ('A', 1.5, 1, '2026-01-01')", db)
    response = server.post(
        "/write", params={"db": db, "precision": precision}, data=(line + "\n").encode()
    )
    assert_400(response, "out of range")
    assert_table_readable(server, db, [["A", 1.5, 1, "2026-01-01T00:00:00.000Z"]])
    assert_no_traceback(server)


def test_import_refuses_values_outside_their_range(server: Server, db: str):
    make_table(server, db)
    for body in (
        "id,ts\n2,10000-01-01T00:00:00Z\n",
        "id,d\n2,inf\n",
        "id,b\n2,1e400\n",
        "id,b\n2," + "9" * 5000 + "\n",
    ):
        response = server.post("/imp", params={"db": db, "table": "t"}, data=body.encode())
        assert response.status_code == 400, (body[:40], response.text)
    assert_table_readable(server, db, EXPECTED)
    assert_no_traceback(server)


# -- finding 2: the statement timeout covers the whole statement --------------------------


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose statements may run 1 ms: every scan of many rows passes it."""
    data: Path = tmp_path_factory.mktemp("strict") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("statement_timeout_ms = 1\n")
    with running_server(data) as running:
        yield running


def test_statement_timeout_covers_update_delete_and_parse(strict_server: Server):
    server = strict_server
    server.sql("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
    # Each INSERT, sent alone, has fewer rows and tokens than the timeout checks count
    # between clock reads, so that loading succeeds under a 1 ms timeout.
    for start in range(0, 30_000, 300):
        server.sql(
            "INSERT INTO big VALUES " + ",".join(f"({n}, {n})" for n in range(start, start + 300))
        )
    for sql in (
        "DELETE FROM big WHERE v >= 0",
        "UPDATE big SET v = v + 1",
        "DELETE FROM big",
        "SELECT count(*) AS n FROM big WHERE v >= 0",
        "SELECT 1 IN (" + ",".join(str(n) for n in range(5000)) + ") AS x",
    ):
        response = answer_while_healthy(server, lambda sql=sql: server.exec(sql))
        assert_400(response, "statement_timeout_ms")
    assert server.rows("SELECT v FROM big WHERE id = 29999") == [[29999]]
    assert_no_traceback(server)
