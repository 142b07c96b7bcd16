"""Serving: a Werkzeug server with a bounded pool of worker threads and a graceful stop.

Werkzeug's `threaded=True` starts one thread per connection without limit, so a burst of
clients could start thousands of threads. Here the accepting thread hands each request to a
fixed pool of workers.

Connections are kept alive (HTTP/1.1) without tying up a worker: a worker answers one
request, then parks the connection in a selector; when the client sends its next request, a
free worker takes it up. So a thousand idle keep-alive clients cost file descriptors, not
threads, and a request never pays for a new TCP connection. Werkzeug's own request runner
closes every connection and waits 10 ms after each answer for stray request bytes; ours
reads exactly the body the request declared instead.
"""

from __future__ import annotations

import http.client
import logging
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from types import FrameType
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler
from werkzeug.wsgi import LimitedStream

log = logging.getLogger("refimpl.http")

CONNECTION_TIMEOUT_SECONDS = 60.0  # a started request must arrive within this
IDLE_SECONDS = 60.0  # a parked keep-alive connection is closed after this long unused
DRAIN_LIMIT = 1024 * 1024  # unread request body a kept-alive connection may skip
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536


class RequestHandler(WSGIRequestHandler):
    """One connection, answered one request at a time by whichever worker is free."""

    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT_SECONDS

    def __init__(self, request: Any, client_address: Any, server: Any) -> None:
        # socketserver's handler serves a whole connection inside its constructor; this one
        # only sets up, and `serve_one` answers each request as it comes.
        self.request = request
        self.client_address = client_address
        self.server = server
        self.setup()
        self.last_used = time.monotonic()

    def serve_one(self) -> bool:
        """Answer one request; True when the connection stays open for another."""
        try:
            self.handle_one_request()
        except (ConnectionError, TimeoutError, OSError):
            return False
        self.last_used = time.monotonic()
        return not self.close_connection

    def has_buffered_request(self) -> bool:
        """True when the next request already sits in our read buffer (pipelining)."""
        self.connection.settimeout(0.0)
        try:
            return bool(self.rfile.peek(1))
        except (BlockingIOError, OSError):
            return False
        finally:
            self.connection.settimeout(self.timeout)

    def close(self) -> None:
        try:
            self.finish()
        except OSError:
            pass
        self.server.shutdown_request(self.connection)

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ = self.make_environ()
        body: LimitedStream | None = None
        if environ.get("wsgi.input_terminated"):
            self.close_connection = True  # a chunked body: where it ends is the app's business
        else:
            body = LimitedStream(self.rfile, int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = body
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answer[:] = [status, headers]
            return self._refuse_write

        result = self.server.app(environ, start_response)
        try:
            self._send(answer[0], answer[1], result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if body is not None and not body.is_exhausted:
            if body.limit - body._pos > DRAIN_LIMIT:
                self.close_connection = True
            else:
                body.exhaust()  # the next request starts after this one's body

    @staticmethod
    def _refuse_write(data: bytes) -> None:
        raise RuntimeError("the WSGI write() callable is not supported; return the body")

    def _send(self, status: str, headers: list[tuple[str, str]], body: Iterable[bytes]) -> None:
        names = {name.lower() for name, _ in headers}
        code = int(status.split(" ", 1)[0])
        bodyless = self.command == "HEAD" or code in (204, 304) or code < 200
        chunked = False
        if "content-length" not in names and not bodyless:
            if self.request_version == "HTTP/1.1":
                chunked = True
            else:
                self.close_connection = True
        if self.request_version != "HTTP/1.1":
            self.close_connection = True
        lines = [f"HTTP/1.1 {status}"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Date: {formatdate(usegmt=True)}")
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        lines.append(f"Connection: {'close' if self.close_connection else 'keep-alive'}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if bodyless:
            self.wfile.write(head)
            return
        pending = [head]
        for chunk in body:
            if not chunk:
                continue
            pending.append(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            if sum(len(p) for p in pending) > 65536:
                self.wfile.write(b"".join(pending))
                pending = []
        if chunked:
            pending.append(b"0\r\n\r\n")
        self.wfile.write(b"".join(pending))  # small answers go out in one write

    def parse_request(self) -> bool:
        """The request line and headers, as `http.server` reads them, minus its email parser.

        The standard library hands the header block to `email.parser`, the largest single
        cost of a small request; a header block is simple enough to split here.
        """
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3:
            self.send_error(400, f"bad request line {self.requestline[:100]!r}")
            return False
        command, path, version = words
        major, dot, minor = version.removeprefix("HTTP/").partition(".")
        if not version.startswith("HTTP/") or not dot or not (major + minor).isdigit():
            self.send_error(400, f"bad HTTP version {version[:20]!r}")
            return False
        if int(major) >= 2:
            self.send_error(505, f"HTTP version {version[:20]} is not supported")
            return False
        self.request_version = version
        self.close_connection = (int(major), int(minor)) < (1, 1)
        self.command, self.path = command, path
        headers = http.client.HTTPMessage()
        for count in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_HEADER_LINE + 1)
            if len(line) > MAX_HEADER_LINE:
                self.send_error(431, "a header line is too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            if count == MAX_HEADERS:
                self.send_error(431, "too many header lines")
                return False
            text = line.decode("iso-8859-1").rstrip("\r\n")
            name, colon, value = text.partition(":")
            if not colon or not name or name != name.strip():
                self.send_error(400, f"malformed header line {text[:100]!r}")
                return False
            headers[name] = value.strip()
        self.headers = headers
        connection = headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None):
        # Malformed request lines and headers: a JSON error like every other, never HTML.
        text = (message or "the request could not be read").replace('"', "'")
        data = ('{"error": "' + text + '"}').encode("utf-8", "replace")
        self.close_connection = True
        head = (
            f"HTTP/1.1 {code} {self.responses.get(code, ('Error',))[0]}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        try:
            self.wfile.write(head + data)
        except OSError:
            pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # No access log: the CPU bounds this server, and query strings may hold data.
        pass


class PooledWSGIServer(BaseWSGIServer):
    """A `BaseWSGIServer` whose requests are answered by `threads` worker threads."""

    multithread = True  # tells Werkzeug (and WSGI apps) that requests run concurrently
    daemon_threads = False

    def __init__(self, host: str, port: int, app: Any, threads: int, queue: int | None = None):
        super().__init__(host, port, app, handler=RequestHandler)
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kdb-http")
        # Requests accepted but not yet started: a few per worker, then accepting waits.
        self._slots = threading.BoundedSemaphore(
            threads + (queue if queue is not None else threads)
        )
        self._parked = selectors.DefaultSelector()
        self._parked_lock = threading.Lock()
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kdb-keepalive", daemon=True)
        self._poller.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            handler = RequestHandler(request, client_address, self)
        except OSError:
            self.shutdown_request(request)
            return
        self._submit(handler)

    def _submit(self, handler: RequestHandler) -> None:
        self._slots.acquire()
        try:
            self._pool.submit(self._answer, handler)
        except RuntimeError:  # the pool is shut down: we are stopping
            self._slots.release()
            handler.close()

    def _answer(self, handler: RequestHandler) -> None:
        keep = False
        try:
            keep = handler.serve_one()
            while keep and handler.has_buffered_request() and not self._stopping.is_set():
                keep = handler.serve_one()
        except Exception:
            self.handle_error(handler.connection, handler.client_address)
            keep = False
        finally:
            self._slots.release()
        if keep and not self._stopping.is_set():
            with self._parked_lock:
                self._parked.register(handler.connection, selectors.EVENT_READ, handler)
        else:
            handler.close()

    def _poll(self) -> None:
        """Hand parked connections whose client spoke again to the pool; close idle ones."""
        while not self._stopping.is_set():
            # epoll reports connections parked while it waits, so no wake-up is needed.
            events = self._parked.select(timeout=0.5)
            for key, _ in events:
                handler: RequestHandler = key.data
                with self._parked_lock:
                    self._parked.unregister(key.fileobj)
                self._submit(handler)
            self._close_idle()
        with self._parked_lock:
            handlers = [key.data for key in self._parked.get_map().values()]
            for handler in handlers:
                self._parked.unregister(handler.connection)
        for handler in handlers:
            handler.close()

    def _close_idle(self) -> None:
        now = time.monotonic()
        with self._parked_lock:
            idle = [
                key.data
                for key in self._parked.get_map().values()
                if now - key.data.last_used > IDLE_SECONDS
            ]
            for handler in idle:
                self._parked.unregister(handler.connection)
        for handler in idle:
            handler.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The app answers its own errors; what arrives here is a broken connection or a bug
        # in serving. Log it once, without the request data.
        log.warning("connection from %s ended with an error", client_address, exc_info=True)

    def drain(self) -> None:
        """Wait until every accepted request has been answered; close kept-alive ones."""
        self._stopping.set()
        self._pool.shutdown(wait=True)
        self._poller.join(timeout=5)


def serve(
    app: Any,
    host: str,
    port: int,
    threads: int,
    on_listening: Callable[[str, int], None],
    on_stop: Callable[[], None],
    on_stopping: Callable[[], None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; then stop accepting, finish running requests, `on_stop`.

    `on_stopping` runs as soon as the signal arrives, before running requests are awaited:
    the place to answer waiting readers and end open streams, which would otherwise hold
    their workers. Returns the exit status (0 after a graceful stop).
    """
    server = PooledWSGIServer(host, port, app, threads)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            stop.set()
            if on_stopping is not None:
                on_stopping()
            # shutdown() waits for serve_forever to return: call it off the main thread.
            threading.Thread(target=server.shutdown, name="kdb-stop", daemon=True).start()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        host_shown, port_shown = server.server_address[:2]
        on_listening(_display_host(host, host_shown), int(port_shown))
        server.serve_forever(poll_interval=0.2)  # closes the listening socket when it returns
    finally:
        server.drain()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        on_stop()
    return 0


def _display_host(asked: str, bound: str) -> str:
    host = bound if asked in ("", "0.0.0.0", "::") else asked
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host
