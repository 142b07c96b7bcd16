"""Running a server as a process: serve until SIGTERM or SIGINT, then stop gracefully.

`PooledWSGIServer` (`server.py`) answers requests; this module owns the process's signals
and the order of a stop: stop accepting, answer waiting requests, finish running ones, then
write out the log lines still queued (`log_queue`).
"""

from __future__ import annotations

import errno
import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType

from refimpl.errors import ConfigError
from refimpl.http.request_log import RequestLog
from refimpl.http.serving import wire
from refimpl.http.serving.limits import ConnectionLimits, raise_open_file_limit
from refimpl.http.serving.log_queue import queued_log
from refimpl.http.serving.server import PooledWSGIServer, WSGIApp


def serve(
    app: WSGIApp,
    host: str,
    port: int,
    threads: int,
    on_listening: Callable[[str, int], None],
    on_stop: Callable[[], None],
    on_stopping: Callable[[], None] | None = None,
    limits: ConnectionLimits | None = None,
    max_body_bytes: int = wire.DEFAULT_MAX_BODY_BYTES,
    request_log: RequestLog | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; then stop accepting, finish running requests, `on_stop`.

    `on_stopping` runs as soon as the signal arrives, before running requests are awaited:
    the place to answer waiting readers and end open streams, which would otherwise hold
    their workers. `request_log` (the app's) queues its lines for the log thread meanwhile.
    Returns the exit status (0 after a graceful stop).
    """
    raise_open_file_limit()  # a connection costs a file descriptor
    server = PooledWSGIServer(
        host, port, app, threads, limits or ConnectionLimits(), max_body_bytes
    )
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            stop.set()
            if on_stopping is not None:
                on_stopping()
            # shutdown() waits for serve_forever to return: call it off the main thread.
            threading.Thread(target=server.shutdown, name="kdb-stop", daemon=True).start()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    # Requests' log lines are written by one thread, off their path.
    with queued_log() as log_queue:
        if request_log is not None and log_queue is not None:
            request_log.write_lines_to(log_queue.put)
        try:
            host_shown, port_shown = server.server_address[:2]
            on_listening(_display_host(host, str(host_shown)), int(port_shown))
            server.serve_forever(poll_interval=0.2)  # closes the listening socket at its end
        finally:
            server.drain()
            if request_log is not None:
                request_log.write_lines_to(None)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            on_stop()
    return 0


def check_port_free(host: str, port: int, setting: str, purpose: str = "listen") -> None:
    """Raise a ConfigError naming `setting` when `host:port` cannot be listened on now
    ("cannot <purpose> on host:port (setting): why; ...").

    Called before a start creates anything (the data folder, the admin token), so that a
    port another process holds, or a host that is not this machine's, stops the start with
    nothing left behind. It binds a socket as the server will (SO_REUSEADDR, so a port in
    TIME_WAIT is free) and closes it again.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        probe = socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "another process listens on it; stop that process, or choose another"
            why += f" {setting} (0 takes a free one)"
        elif exc.errno == errno.EACCES:
            why = f"a port under 1024 needs privileges; choose another {setting}"
        else:
            # create_server adds "(while attempting to bind on address ...)": we say it.
            reason = (exc.strerror or str(exc)).split(" (while attempting", 1)[0]
            why = f"{reason}; host must be an address of this machine"
            why += " (127.0.0.1, or 0.0.0.0 for every one)"
        raise ConfigError(f"cannot {purpose} on {host}:{port} ({setting}): {why}") from None
    probe.close()


def _display_host(asked: str, bound: str) -> str:
    host = bound if asked in ("", "0.0.0.0", "::") else asked
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host
