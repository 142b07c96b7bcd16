"""/exec, /exp and the small routes against a real server process."""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import stat
from pathlib import Path

import requests

from tests.http.conftest import Server, start_server


def test_startup_prints_token_and_keeps_it_private(server: Server):
    assert server.token.startswith("kdb_")
    token_file = server.data / "admin.token"
    assert token_file.read_text().strip() == server.token
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert any(line.startswith("listening on http://127.0.0.1:") for line in server.lines)


def test_get_and_post_forms(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, name STRING)", db)
    answer = server.sql("INSERT INTO t VALUES (1, 'a'), (2, NULL)", db)
    assert answer == {
        "query": "INSERT INTO t VALUES (1, 'a'), (2, NULL)",
        "message": "2 row(s) inserted",
        "count": 2,
    }
    query = "SELECT id, name FROM t ORDER BY id"
    expected = {
        "query": query,
        "columns": [{"name": "id", "type": "INT"}, {"name": "name", "type": "STRING"}],
        "dataset": [[1, "a"], [2, None]],
        "count": 2,
    }
    assert server.get("/exec", params={"query": query, "db": db}).json() == expected
    text = server.post(
        "/exec", params={"db": db}, data=query, headers={"Content-Type": "text/plain"}
    )
    assert text.json() == expected
    form = server.post("/exec", params={"db": db}, data={"query": query})
    assert form.json() == expected
    bare = server.post("/exec", params={"db": db}, data=query.encode())
    assert bare.headers["Content-Type"] == "application/json"
    assert bare.json() == expected


def test_sql_bodies_by_content_type_with_and_without_parameters(server: Server, db: str):
    # The bare SQL types, as written or with parameters and capitals, are the SQL itself;
    # another type is refused with what to send instead.
    query = "SELECT 1 AS one"
    for content_type in (
        "text/plain",
        "application/sql",
        "text/plain; charset=utf-8",
        "Text/Plain",
        "application/SQL; charset=UTF-8",
    ):
        answer = server.post(
            "/exec", params={"db": db}, data=query, headers={"Content-Type": content_type}
        )
        assert answer.status_code == 200, (content_type, answer.text)
        assert answer.json()["dataset"] == [[1]]
    refused = server.post(
        "/exec", params={"db": db}, data=query, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 400
    assert "content type 'application/json' is not taken here" in refused.json()["error"]


def test_default_database_is_demo(server: Server):
    assert server.get("/exec", params={"query": "SELECT 1 AS one"}).json()["dataset"] == [[1]]


def test_scripts_run_in_one_session(server: Server, db: str):
    answer = server.sql(
        "CREATE TABLE acct (id INT, v INT); BEGIN; INSERT INTO acct VALUES (1, 10);"
        " INSERT INTO acct VALUES (2, 20); COMMIT",
        db,
    )
    assert answer["message"] == "transaction committed"
    assert answer["statements"] == 5
    rows = server.sql("SELECT count(*) AS n FROM acct; SELECT id FROM acct ORDER BY id", db)
    assert rows["dataset"] == [[1], [2]] and rows["statements"] == 2


def test_a_failed_statement_of_a_script(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT)", db)
    response = server.exec("BEGIN; INSERT INTO t VALUES (1); INSERT INTO nope VALUES (2)", db)
    assert response.status_code == 400
    body = response.json()
    assert "nope" in body["error"] and body["statement"] == 3
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]  # rolled back


def test_syntax_error_has_a_position(server: Server):
    response = server.exec("SELECT FROM WHERE")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] and body["position"]["line"] == 1 and body["position"]["column"] >= 1


def test_values_in_json(server: Server, db: str):
    server.sql("CREATE TABLE v (i INT, b BIGINT, d DOUBLE, s SYMBOL, ok BOOLEAN, ts TIMESTAMP)", db)
    server.sql(
        "INSERT INTO v VALUES (1, 9007199254740993, 1.5, 'NABIL', true,"
        " '2026-10-22T05:43:31.573Z'), (2, NULL, NULL, NULL, false,"
        " '2026-10-22T05:43:31.573120Z'), (3, 0, 0.0, 'X', NULL, '2026-10-22T05:43:31Z')",
        db,
    )
    answer = server.sql("SELECT * FROM v ORDER BY i", db)
    assert [c["type"] for c in answer["columns"]] == [
        "INT", "BIGINT", "DOUBLE", "SYMBOL", "BOOLEAN", "TIMESTAMP"
    ]  # fmt: skip
    assert answer["dataset"] == [
        [1, 9007199254740993, 1.5, "NABIL", True, "2026-10-22T05:43:31.573Z"],
        [2, None, None, None, False, "2026-10-22T05:43:31.573120Z"],
        [3, 0, 0.0, "X", None, "2026-10-22T05:43:31.000Z"],
    ]


def test_export_csv(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, name STRING, ts TIMESTAMP)", db)
    server.sql(
        "INSERT INTO t VALUES (1, 'a,b', '2026-01-02T03:04:05.006Z'), (2, NULL, NULL),"
        " (3, 'say \"hi\"', NULL)",
        db,
    )
    response = server.get("/exp", params={"query": "SELECT * FROM t ORDER BY id", "db": db})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/csv")
    assert response.content.startswith(b'id,name,ts\r\n1,"a,b",2026-01-02T03:04:05.006Z\r\n')
    rows = list(csv.reader(io.StringIO(response.text, newline="")))
    assert rows == [
        ["id", "name", "ts"],
        ["1", "a,b", "2026-01-02T03:04:05.006Z"],
        ["2", "", ""],
        ["3", 'say "hi"', ""],
    ]


def test_export_refuses_changes_before_running_them(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT)", db)
    response = server.get("/exp", params={"query": "INSERT INTO t VALUES (1)", "db": db})
    assert response.status_code == 400 and "/exec" in response.json()["error"]
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


def test_small_routes(server: Server, db: str):
    health = server.get("/health", token=None)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    document = server.get("/openapi.json", token=None).json()
    assert document["openapi"].startswith("3.1") and "/exec" in document["paths"]
    stats = server.get("/api/stats").json()
    assert db in stats["databases"] and "demo" in stats["databases"]
    one = server.get("/api/stats", params={"db": db}).json()
    assert list(one["databases"]) == [db]


def test_unknown_route_and_wrong_method_are_json(server: Server):
    missing = server.get("/nope")
    assert missing.status_code == 404 and missing.json()["error"]
    wrong = server.request("PUT", "/exec")
    assert wrong.status_code == 405 and "GET" in wrong.headers["Allow"]
    assert wrong.json()["error"]


def test_session_cookie(server: Server):
    session = requests.Session()
    opened = session.post(server.url + "/api/session", data=server.token, timeout=10)
    assert opened.status_code == 200 and opened.json()["user"] == "admin"
    cookie = opened.headers["Set-Cookie"]
    for part in ("kdb_session=", "HttpOnly", "SameSite=Strict", "Path=/", "Expires="):
        assert part in cookie
    answer = session.get(server.url + "/exec", params={"query": "SHOW USERS"}, timeout=10)
    assert answer.status_code == 200
    assert session.delete(server.url + "/api/session", timeout=10).status_code == 204
    after = requests.get(
        server.url + "/exec",
        params={"query": "SHOW USERS"},
        cookies={"kdb_session": opened.cookies["kdb_session"]},
        timeout=10,
    )
    assert after.status_code == 401
    json_open = requests.post(server.url + "/api/session", json={"token": server.token}, timeout=10)
    assert json_open.status_code == 200
    wrong = requests.post(server.url + "/api/session", data="kdb_wrong", timeout=10)
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"].startswith("Bearer")


def test_stop_is_graceful_and_durable(tmp_path):
    first = start_server(tmp_path / "data")
    first.sql("CREATE TABLE t (id INT); INSERT INTO t VALUES (1), (2)")
    assert first.stop(signal.SIGTERM) == 0
    second = start_server(tmp_path / "data")
    try:
        assert second.token == ""  # not the first start: no new token is printed
        token = (tmp_path / "data" / "admin.token").read_text().strip()
        second.token = token
        assert second.rows("SELECT id FROM t ORDER BY id") == [[1], [2]]
    finally:
        assert second.stop(signal.SIGINT) == 0


def test_dev_mode(tmp_path):
    dev = start_server(tmp_path / "data", "--dev")
    try:
        assert dev.get("/exec", params={"query": "SHOW USERS"}, token=None).status_code == 200
    finally:
        assert dev.stop() == 0
    import subprocess
    import sys

    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "refimpl",
            "serve",
            "--dev",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--data",
            str(tmp_path / "other"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "loopback" in refused.stderr


def test_a_burst_is_answered_by_a_bounded_pool(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    small = start_server(tmp_path / "data", "--threads", "2")
    try:
        peak = 0

        def call(n: int) -> int:
            nonlocal peak
            response = small.get("/exec", params={"query": f"SELECT {n} AS n"})
            status = Path(f"/proc/{small.process.pid}/status")
            if status.exists():
                found = re.search(r"Threads:\s+(\d+)", status.read_text())
                assert found is not None
                threads = int(found.group(1))
                peak = max(peak, threads)
            assert response.json()["dataset"] == [[n]]
            return response.status_code

        with ThreadPoolExecutor(32) as pool:
            assert set(pool.map(call, range(200))) == {200}
        # Two workers, the accepting thread, the main thread, and the engine's own few.
        assert peak <= 10, peak
    finally:
        assert small.stop() == 0
