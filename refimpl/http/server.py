"""Serving: a Werkzeug server with a bounded pool of worker threads and a graceful stop.

Werkzeug's `threaded=True` starts one thread per connection without limit, so a burst of
clients could start thousands of threads. Here the accepting thread hands each connection to
a fixed pool; when every worker is busy and the small queue is full, it stops accepting and
further clients wait in the kernel's listen backlog instead of costing memory.

Werkzeug closes every connection after one answer (no keep-alive), so a worker is tied up
for exactly one request; a socket timeout stops a client that sends nothing from holding one.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

log = logging.getLogger("refimpl.http")

CONNECTION_TIMEOUT_SECONDS = 60.0


class RequestHandler(WSGIRequestHandler):
    # A client that stops sending (or reading) for this long loses its connection.
    timeout = CONNECTION_TIMEOUT_SECONDS

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # No access log: the CPU bounds this server, and query strings may hold data.
        pass


class PooledWSGIServer(BaseWSGIServer):
    """A `BaseWSGIServer` whose connections are answered by `threads` worker threads."""

    multithread = True  # tells Werkzeug (and WSGI apps) that requests run concurrently
    daemon_threads = False

    def __init__(self, host: str, port: int, app: Any, threads: int, queue: int | None = None):
        super().__init__(host, port, app, handler=RequestHandler)
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kdb-http")
        # Connections accepted but not yet started: a few per worker, then accepting waits.
        self._slots = threading.BoundedSemaphore(
            threads + (queue if queue is not None else threads)
        )

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            self._pool.submit(self._answer, request, client_address)
        except RuntimeError:  # the pool is shut down: we are stopping
            self._slots.release()
            self.shutdown_request(request)

    def _answer(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The app answers its own errors; what arrives here is a broken connection or a bug
        # in serving. Log it once, without the request data.
        log.warning("connection from %s ended with an error", client_address, exc_info=True)

    def drain(self) -> None:
        """Wait until every accepted connection has been answered."""
        self._pool.shutdown(wait=True)


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
