"""A lying server for the runner's step kinds (tests/conformance/test_steps.py and
test_operators.py): a tiny `http.server` app that stands for an implementation under test,
whose `Behaviour` flags each make it tell one lie the runner must catch."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Behaviour:
    """What the server under test does; each flag is one lie."""

    answers_early: bool = False  # a waiting request answers before the commit
    never_answers: bool = False  # a waiting request answers not even after the commit
    wrong_answer: bool = False  # the waiting request answers with the wrong value
    keeps_boot: bool = False  # a restart keeps the boot id
    repeats_event: bool = False  # a reconnect sends the last event again
    down_after_restart_s: float = 0.0  # /health answers 503 this long after a restart
    boot: int = 1
    committed: threading.Event = field(default_factory=threading.Event)
    down_until: float = 0.0
    closed_waits: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    behaviour: Behaviour

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, value: Any) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        b = self.behaviour
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        if url.path == "/exec":
            if body.startswith("COMMIT"):
                b.committed.set()
            self._json(200, {"query": body, "message": "ok", "count": 0})
        elif url.path == "/health":
            if time.monotonic() < b.down_until:
                self._json(503, {"error": "starting"})
            else:
                self._json(200, {"status": "ok"})
        elif url.path == "/wait":
            self._wait()
        elif url.path == "/rev":
            self._json(200, {"boot": f"boot{b.boot}"})
        elif url.path == "/_restart":
            if not b.keeps_boot:
                b.boot += 1
            b.down_until = time.monotonic() + b.down_after_restart_s
            self._json(200, {})
        elif url.path == "/events":
            self._events(query, self.headers.get("Last-Event-ID"))
        else:
            self._json(404, {"error": "no such route"})

    def _wait(self) -> None:
        b = self.behaviour
        if b.never_answers:
            try:
                time.sleep(20)  # until the runner closes the connection (or the test ends)
                self._json(200, {"n": 1})
            except OSError:
                b.closed_waits.append("closed")
            return
        if not b.answers_early:
            b.committed.wait(20)
        self._json(200, {"n": 0 if b.wrong_answer or not b.committed.is_set() else 1})

    def _events(self, query: dict[str, list[str]], last_id: str | None) -> None:
        start = int(last_id) + 1 if last_id else 1
        if last_id and self.behaviour.repeats_event:
            start -= 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        count = int(query.get("n", ["2"])[0])
        for n in range(start, start + count):
            self._chunk(f"event: tick\nid: {n}\ndata: {n}\n\n")
        self._chunk("event: done\ndata: {}\n\n")
        try:
            time.sleep(3)  # a long-lived stream: the reader must stop on its own
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@contextmanager
def lying_server() -> Iterator[tuple[str, Behaviour]]:
    """A server that lies as its `Behaviour` says (honest until a test sets a flag), for
    the block: its URL and the behaviour to change."""
    behaviour = Behaviour()
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", behaviour
    finally:
        httpd.shutdown()
        httpd.server_close()
