"""A scripted HTTP server that stands for an implementation under test, for the runner's
own tests: it keeps databases, tokens and users in memory and answers the few statements and
routes those tests send (`FakeState` says what it holds; the test changes it to make it lie);
and an example made from one case (`http_example`), as the runner reads it from a chapter.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from conformance.cases import example_from_json, extract_chapter

ADMIN = "admintok"


class FakeState:
    def __init__(self) -> None:
        self.databases = {"demo"}
        self.tokens = {ADMIN}
        self.users: set[str] = set()
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeState

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any, extra: dict | None = None) -> None:
        self._send(status, json.dumps(value).encode(), "application/json", extra)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.state.requests.append((method, url.path, q))
        auth = self.headers.get("Authorization", "")
        if auth and auth.removeprefix("Bearer ") not in self.state.tokens:
            self._json(401, {"error": "bad token"}, {"WWW-Authenticate": "Bearer"})
            return
        if url.path == "/health":
            self._json(200, {"status": "ok"})
        elif url.path == "/exec":
            self._exec(q.get("db", ["demo"])[0], body or q.get("query", [""])[0], auth)
        elif url.path == "/events":
            events = (
                'retry: 1000\n\nevent: change\nid: 3\ndata: {"lsn": 3, "op": "upsert"}\n\n'
                "event: position\nid: 3\ndata: {}\n\n"
            )
            self._send(200, events.encode(), "text/event-stream")
        elif url.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(2):
                chunk = f"event: tick\nid: {n}\ndata: {n}\n\n".encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            time.sleep(3)  # a long-lived stream: the runner must stop reading on its own
        elif url.path == "/exp":
            self._send(200, b"id,name\r\n1,a\r\n", "text/csv; charset=utf-8")
        else:
            self._json(404, {"error": "no such route"})

    def _exec(self, db: str, sql: str, auth: str) -> None:
        st = self.state
        if db not in st.databases:
            self._json(404, {"error": f"database '{db}' does not exist"})
            return
        words = sql.split()
        with st.lock:
            if sql.startswith("CREATE DATABASE"):
                st.databases.add(words[2])
                self._json(
                    200, {"query": sql, "message": f"database '{words[2]}' created", "count": 0}
                )
            elif sql.startswith("DROP DATABASE"):
                st.databases.discard(words[2])
                self._json(
                    200, {"query": sql, "message": f"database '{words[2]}' dropped", "count": 0}
                )
            elif sql.startswith("CREATE TOKEN"):
                st.tokens.add("tok-123")
                self._json(
                    200,
                    {
                        "query": sql,
                        "columns": [{"name": "token", "type": "STRING"}],
                        "dataset": [["tok-123"]],
                        "count": 1,
                    },
                )
            elif sql.startswith("SELECT"):
                self._json(
                    200,
                    {
                        "query": sql,
                        "columns": [
                            {"name": "id", "type": "INT"},
                            {"name": "bal", "type": "DOUBLE"},
                        ],
                        "dataset": [[2, 20.0], [1, 10.5]],
                        "count": 2,
                    },
                )
            elif sql.startswith("INSERT"):
                self._json(200, {"query": sql, "message": "1 row(s) inserted", "count": 1})
            elif sql == "SHOW USERS":
                if auth.removeprefix("Bearer ") != ADMIN:
                    self._json(403, {"error": "SHOW USERS needs ADMIN"})
                    return
                rows = [[name, name == "admin", 1] for name in ("admin", *sorted(st.users))]
                self._json(200, {"query": sql, "dataset": rows, "count": len(rows)})
            elif sql.startswith("CREATE USER"):
                st.users.add(words[2])
                self._json(200, {"query": sql, "message": "user created", "count": 0})
            elif sql.startswith("DROP USER IF EXISTS"):
                st.users.discard(words[4])
                self._json(200, {"query": sql, "message": "user dropped", "count": 0})
            elif sql.startswith("WHO"):
                self._json(200, {"query": sql, "message": f"db {db}", "count": 0})
            else:
                self._json(400, {"error": "syntax error", "position": {"line": 1, "column": 1}})


@contextmanager
def fake_server() -> Iterator[tuple[str, FakeState]]:
    """The server's base URL and its state, for as long as the block runs."""
    state = FakeState()
    handler = type("Handler", (FakeHandler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def http_example(ex_id: str, case: dict[str, Any]) -> Any:
    """The conformance example `ex_id` of one HTTP case, as the runner reads it from a chapter."""
    text = f"```http-example id={ex_id}\n{json.dumps(case)}\n```\n"
    doc = extract_chapter(text, "spec/h.md", "0.0.0")
    return example_from_json(doc["examples"][0])
