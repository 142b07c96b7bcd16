"""Bad input of every kind gets a clear 4xx JSON answer and changes nothing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from refimpl.errors import Unavailable, WritesStopped
from refimpl.http.error_answers import to_response
from tests.http.conftest import Server, running_server


def assert_error(response: requests.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in response.text and "<html" not in response.text.lower()
    for word in words:
        assert word in body["error"], (word, body["error"])
    return body


@pytest.fixture
def table(server: Server, db: str) -> str:
    server.sql("CREATE TABLE t (id INT, v DOUBLE); INSERT INTO t VALUES (1, 1.0)", db)
    return "t"


def unchanged(server: Server, db: str) -> None:
    assert server.rows("SELECT id, v FROM t", db) == [[1, 1.0]]
    assert server.rows("SHOW TABLES", db) == [["t", "table"]]


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC 1",
        "INSERT INTO t VALUES (",
        "INSERT INTO t VALUES ('x', 1.0)",
        "INSERT INTO t VALUES (2, 2.0), (3)",
        "UPDATE t SET nope = 1",
        "DROP TABLE nope",
        "SELECT * FROM nope",
        "CREATE TABLE t (id INT)",
        "CREATE TABLE u (UNIQUE (id))",  # clauses and no column: was a 500
        "INSERT INTO t VALUES (2, 2.0); SELEC",
        "COMMIT",
        "'",
        "\x00",
        ";",
    ],
)
def test_malformed_sql(server: Server, db: str, table: str, sql: str):
    assert_error(server.exec(sql, db), 400)
    unchanged(server, db)


def test_empty_sql(server: Server, db: str):
    assert_error(server.get("/exec", params={"db": db, "query": ""}), 400)
    assert_error(server.post("/exec", params={"db": db}, data=b""), 400)
    assert_error(server.get("/exec", params={"db": db}), 400)


def test_sql_given_twice(server: Server, db: str):
    response = server.post("/exec", params={"db": db, "query": "SELECT 1"}, data=b"SELECT 2")
    assert_error(response, 400, "once")


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/exec", "GET"),
        ("/exp", "GET"),
        ("/imp", "POST"),
        ("/write", "POST"),
        ("/api/stats", "GET"),
        ("/health", "GET"),
    ],
)
def test_unknown_parameters_are_named(server: Server, path: str, method: str):
    response = server.request(method, path, params={"query": "SELECT 1", "colour": "red"})
    body = assert_error(response, 400, "'colour'")
    if path not in ("/exec", "/exp"):
        assert "'query'" in body["error"]


def test_repeated_parameter(server: Server):
    response = server.get("/exec?query=SELECT%201&query=SELECT%202")
    assert_error(response, 400, "query")


@pytest.mark.parametrize("path", ["/exec?query=SELECT%201", "/exp?query=SELECT%201"])
def test_unknown_database(server: Server, path: str):
    assert_error(server.get(path + "&db=nope"), 404, "nope")
    assert_error(server.post("/imp?db=nope&table=t", data=b"id\n1\n"), 404, "nope")
    assert_error(server.post("/write?db=nope", data=b"m v=1\n"), 404, "nope")
    assert_error(server.get("/api/stats?db=nope"), 404, "nope")


def test_bad_utf8(server: Server, db: str, table: str):
    assert_error(server.post("/exec", params={"db": db}, data=b"SELECT '\xff'"), 400, "UTF-8")
    assert_error(server.get(f"/exec?db={db}&query=SELECT%20%27%FF%27"), 400, "UTF-8")
    body = b"id,v\n2,\xff\n"
    assert_error(server.post("/imp", params={"db": db, "table": "t"}, data=body), 400, "UTF-8")
    assert_error(server.post("/write", params={"db": db}, data=b"t v=\xff\n"), 400, "UTF-8")
    unchanged(server, db)


def test_wrong_content_type(server: Server, db: str):
    response = server.post(
        "/exec", params={"db": db}, json={"query": "SELECT 1"}
    )  # JSON is not one of the body forms
    assert_error(response, 400, "content type")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"t v=1 notatime\n", ["line 1", "timestamp"]),
        (b"t\n", ["line 1"]),
        (b"t v\n", ["line 1", "'v'"]),
        (b"t v=\n", ["line 1", "empty"]),
        (b't v="open\n', ["line 1", "not closed"]),
        (b"t,tag v=1\n", ["line 1", "tag"]),
        (b"t v=1,v=2\n", ["line 1", "twice"]),
        (b"bad-name v=1\n", ["line 1", "table"]),
        (b"t timestamp=1\n", ["line 1", "timestamp"]),
        (b"t v=1i\nt v=99999999999999999999i\n", ["line 2", "range"]),
        (b"t v=nan\n", ["line 1"]),
        (b"t v=1\n\n  \nt v=2 1 2\n", ["line 4"]),
    ],
)
def test_broken_line_protocol(server: Server, db: str, table: str, body: bytes, words: list):
    assert_error(server.post("/write", params={"db": db}, data=body), 400, *words)
    unchanged(server, db)


def test_bad_precision(server: Server, db: str, table: str):
    response = server.post("/write", params={"db": db, "precision": "h"}, data=b"t v=1 1\n")
    assert_error(response, 400, "precision")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"id,v\n2,x\n", ["line 2", "column 2"]),
        (b"id,v\n2,2.0\n3\n", ["line 3"]),
        (b"id,v\n99999999999,1\n", ["line 2", "column 1"]),
        (b"id,nope\n2,1\n", ["nope"]),
        (b'id,v\n"2,1\n', ["line"]),
    ],
)
def test_broken_csv(server: Server, db: str, table: str, body: bytes, words: list):
    response = server.post("/imp", params={"db": db, "table": "t"}, data=body)
    assert_error(response, 400, *words)
    unchanged(server, db)


def test_import_needs_a_table(server: Server, db: str):
    assert_error(server.post("/imp", params={"db": db}, data=b"id\n1\n"), 400, "table")
    response = server.post("/imp", params={"db": db, "table": "x;DROP"}, data=b"id\n1\n")
    assert response.status_code in (400, 404)


# --- oversized bodies: a server whose limit is 1 MB --------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("small") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("max_body_mb = 1\n")
    with running_server(data) as running:
        yield running


def test_oversized_bodies(small: Server):
    big = b"x" * (1024 * 1024 + 1)
    assert_error(small.post("/exec", data=big), 413)
    assert_error(small.post("/write", data=big), 413)
    assert_error(small.post("/imp", params={"table": "t"}, data=big), 413)
    assert_error(small.post("/exec", data={"query": "x" * (1024 * 1024 + 1)}), 413)
    fits = b"SELECT 1 AS one" + b" " * (1024 * 1024 - 100)
    assert small.post("/exec", data=fits).status_code == 200


def test_oversized_chunked_body(small: Server):
    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b"x" * 100_000

    assert_error(small.post("/exec", data=chunks()), 413)


def test_garbage_request_line_gets_no_traceback(small: Server):
    parts = urlsplit(small.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(b"NONSENSE\r\n\r\n")
        answer = conn.recv(65536)
    assert b"Traceback" not in answer
    assert small.get("/health").status_code == 200


# --- whole-number parameters --------------------------------------------------------------------

HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("params", "headers", "name"),
    [
        ({"from": HUGE}, {}, "from"),
        ({"from": "²"}, {}, "from"),
        ({"from": "9223372036854775808"}, {}, "from"),
        ({"limit": HUGE}, {}, "limit"),
        ({"limit": "1²"}, {}, "limit"),
        ({"wait": HUGE}, {}, "wait"),
        ({"wait": "٣"}, {}, "wait"),  # an Arabic-Indic digit: isdigit() says yes, not ASCII
        ({}, {"Last-Event-ID": HUGE}, "Last-Event-ID"),
        ({}, {"Last-Event-ID": "²"}, "Last-Event-ID"),
    ],
)
def test_whole_numbers_are_ascii_digits_of_bounded_length(
    server: Server, db: str, table: str, params: dict, headers: dict, name: str
):
    query = {"db": db, "table": "t", "format": "json", **params}
    body = assert_error(server.get("/api/changes", params=query, headers=headers), 400, name)
    assert len(body["error"]) < 300  # the value is shown cut short
    assert server.get("/health", timeout=2).status_code == 200
    unchanged(server, db)


def test_subscribe_wait_is_bounded_too(server: Server, db: str, table: str):
    query = {"db": db, "query": "SELECT id FROM t", "wait": HUGE}
    assert_error(server.get("/api/subscribe", params=query), 400, "wait")
    unchanged(server, db)


def test_a_declared_body_past_the_limit_is_refused_before_it_is_sent(small: Server):
    parts = urlsplit(small.url)
    head = (
        f"POST /exec HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {small.token}\r\n"
        f"Content-Length: {2 * 1024 * 1024}\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(head)  # and no body: the answer comes before it
        answer = b""
        while part := conn.recv(65536):
            answer += part
    assert answer.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in answer
    assert b"max_body_mb" in answer
    assert small.get("/health", timeout=2).status_code == 200


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(small: Server):
    parts = urlsplit(small.url)
    head = (
        f"POST /exec HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {small.token}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(head)
        try:
            for _ in range(17):  # 17 x 64 KB: past 1 MB, and the stream is not ended
                conn.sendall(chunk)
        except OSError:
            pass  # refused already
        answer = b""
        try:
            while part := conn.recv(65536):
                answer += part
        except ConnectionResetError:
            pass
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert small.get("/health", timeout=2).status_code == 200


def test_a_failed_log_says_a_restart_is_needed_and_not_to_retry():
    # What every write answers once the log's fsync failed (refimpl.engine.storage.wal).
    answer = to_response(WritesStopped("writes stopped: the log could not fsync (EIO)"))
    assert answer.status_code == 503
    assert "Retry-After" not in dict(answer.headers)
    assert "restart" in json.loads(answer.body)["error"]
    shutting_down = to_response(Unavailable("the server is shutting down"))
    assert "Retry-After" in dict(shutting_down.headers)
