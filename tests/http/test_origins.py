"""No web page can act for a user: Host names, foreign origins, HEAD, GET with the cookie.

Against real servers: one with authentication (the `server` fixture: a browser session
opened through POST /api/session), one with --dev, and one behind a TLS proxy.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.http.conftest import Server, running_server

EVIL = "https://evil.example"


def _tables(server: Server, db: str) -> list[str]:
    return [row[0] for row in server.rows("SHOW TABLES", db)]


def _alive(server: Server) -> None:
    began = time.monotonic()
    assert server.get("/health", token=None, timeout=10).status_code == 200
    assert time.monotonic() - began < 2.0


def _raw(server: Server, head: str) -> bytes:
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(head.encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and data.endswith(b"}"):
                break
    return data


@pytest.fixture
def browser(server: Server, db: str) -> requests.Session:
    """A browser's cookie jar, signed in with a token of a database admin of `db`."""
    name = "b_" + db
    server.sql(f"CREATE USER {name}; GRANT ADMIN ON DATABASE {db} TO {name}", db)
    session = requests.Session()
    opened = session.post(server.url + "/api/session", data=server.new_token(name, db))
    assert opened.status_code == 200, opened.text
    server.sql("CREATE TABLE t (id INT); INSERT INTO t VALUES (1)", db)
    return session


def test_a_foreign_host_is_refused_whatever_it_asks(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT)", db)
    for method, path, body in (
        ("POST", "/exec", b"DROP TABLE t"),
        ("GET", "/health", None),
        ("GET", "/nope", None),
    ):
        response = server.request(
            method, path, params={"db": db}, data=body, headers={"Host": "evil.example"}
        )
        assert response.status_code == 400, (path, response.text)
        assert "evil.example" in response.json()["error"]
        assert "allowed_hosts" in response.json()["error"]
    assert _tables(server, db) == ["t"]
    port = urlsplit(server.url).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST."):
        assert server.get("/health", headers={"Host": host}).status_code == 200, host
    _alive(server)


def test_a_request_without_host(server: Server):
    answer = _raw(server, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400") and b"Host" in answer
    answer = _raw(server, "GET /health HTTP/1.0\r\n\r\n")
    assert answer.split(b"\r\n")[0].endswith(b"200 OK")


def test_a_page_of_another_origin_cannot_use_the_cookie(server: Server, db: str, browser):
    exec_url = f"{server.url}/exec?db={db}"
    refused = [
        browser.post(
            exec_url, data=b"DROP TABLE t", headers={"Origin": EVIL, "Content-Type": "text/plain"}
        ),
        browser.post(exec_url, data={"query": "DROP TABLE t"}, headers={"Origin": EVIL}),
        browser.post(exec_url, data=b"DROP TABLE t", headers={"Origin": "null"}),
        browser.post(exec_url, data=b"DROP TABLE t", headers={"Referer": EVIL + "/page"}),
        browser.post(exec_url, data=b"DROP TABLE t", headers={"Sec-Fetch-Site": "cross-site"}),
        browser.get(exec_url, params={"query": "SELECT * FROM t"}, headers={"Origin": EVIL}),
        browser.get(
            f"{server.url}/api/changes", params={"db": db, "table": "t"}, headers={"Origin": EVIL}
        ),
        # Another port of the same host is another origin.
        browser.post(
            exec_url,
            data=b"DROP TABLE t",
            headers={"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"},
        ),
    ]
    for response in refused:
        assert response.status_code == 403, response.request.headers
        assert "another origin" in response.json()["error"]
    assert _tables(server, db) == ["t"]
    # The server's own pages, and clients that are not browsers, are let in.
    own = browser.post(
        exec_url,
        data=b"INSERT INTO t VALUES (2)",
        headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
    )
    assert own.status_code == 200, own.text
    assert browser.post(exec_url, data=b"INSERT INTO t VALUES (3)").status_code == 200
    # A token is never sent by a browser on its own: it is not asked where it comes from.
    assert (
        server.post(
            "/exec", params={"db": db}, data=b"SELECT 1", headers={"Origin": EVIL}
        ).status_code
        == 200
    )
    assert server.rows("SELECT count(*) FROM t", db) == [[3]]


def test_a_page_of_another_origin_cannot_sign_a_browser_in(server: Server):
    response = requests.post(
        server.url + "/api/session", data=server.token, headers={"Origin": EVIL}, timeout=10
    )
    assert response.status_code == 403
    assert "set-cookie" not in response.headers


def test_get_with_the_cookie_changes_nothing(server: Server, db: str, browser):
    for sql in ("DROP TABLE t", "INSERT INTO t VALUES (5)", "SELECT 1 AS one; DROP TABLE t"):
        response = browser.get(f"{server.url}/exec", params={"db": db, "query": sql})
        assert response.status_code == 400, sql
        assert "POST" in response.json()["error"]
    assert _tables(server, db) == ["t"]
    assert server.rows("SELECT id FROM t", db) == [[1]]
    answer = browser.get(f"{server.url}/exec", params={"db": db, "query": "SELECT id FROM t"})
    assert answer.status_code == 200 and answer.json()["dataset"] == [[1]]
    # A token client keeps QuestDB's GET for every statement.
    dropped = server.get("/exec", params={"db": db, "query": "DROP TABLE t"})
    assert dropped.status_code == 200 and _tables(server, db) == []


def test_head_runs_nothing(server: Server, db: str, browser):
    for path, params in (
        ("/exec", {"db": db, "query": "DROP TABLE t"}),
        ("/exp", {"db": db, "query": "SELECT * FROM t"}),
        ("/api/subscribe", {"db": db, "query": "SUBSCRIBE SELECT * FROM t"}),
        ("/api/changes", {"db": db, "table": "t"}),
    ):
        response = server.request("HEAD", path, params=params)
        assert response.status_code == 405, path
        assert "HEAD" not in response.headers["Allow"] and "GET" in response.headers["Allow"]
        assert browser.head(server.url + path, params=params).status_code == 405
    assert _tables(server, db) == ["t"]
    assert server.request("HEAD", "/health").status_code == 200
    assert server.request("HEAD", "/openapi.json").status_code == 200


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("dev") / "data", "--dev") as running:
        yield running


def test_dev_mode_is_not_open_to_other_sites(dev_server: Server):
    dev_server.sql("CREATE TABLE IF NOT EXISTS kept (id INT)")
    attacks = [
        # DNS rebinding: the page's own name now points at the server.
        dev_server.post(
            "/exec",
            data=b"DROP TABLE kept",
            token=None,
            headers={"Host": "evil.example", "Content-Type": "text/plain"},
        ),
        dev_server.post(
            "/exec",
            data=b"DROP TABLE kept",
            token=None,
            headers={"Origin": EVIL, "Content-Type": "text/plain"},
        ),
        dev_server.post(
            "/exec",
            data={"query": "CREATE TABLE planted (id INT)"},
            token=None,
            headers={"Origin": EVIL},
        ),
        dev_server.get(
            "/exec",
            params={"query": "DROP TABLE kept"},
            token=None,
            headers={"Sec-Fetch-Site": "cross-site"},
        ),
        dev_server.get(
            "/exec",
            params={"query": "DROP TABLE kept"},
            token=None,
            headers={"Referer": EVIL + "/"},
        ),
    ]
    assert [a.status_code for a in attacks] == [400, 403, 403, 403, 403]
    assert [row[0] for row in dev_server.rows("SHOW TABLES")] == ["kept"]
    _alive(dev_server)
    # A client that is no browser still uses --dev as before, GET included.
    assert dev_server.get("/exec", params={"query": "DROP TABLE kept"}).status_code == 200


def test_behind_tls_the_cookie_is_secure_and_hosts_are_the_configured(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("behind_tls = true\nallowed_hosts = db.example\n")
    with running_server(data) as running:
        port = urlsplit(running.url).port
        opened = requests.post(
            running.url + "/api/session",
            data=running.token,
            headers={"Host": f"db.example:{port}"},
            timeout=10,
        )
        assert opened.status_code == 200, opened.text
        cookie = opened.headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        # The listen address is not among the configured names.
        assert running.get("/health").status_code == 400
        assert running.get("/health", headers={"Host": "db.example"}).status_code == 200
