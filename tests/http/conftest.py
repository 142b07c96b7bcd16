"""A real server process per test module, and a fresh database per test.

The server is started as users start it (`python -m refimpl serve --port 0 --data DIR`); its
admin token and port are read from what it prints. It is stopped with SIGTERM and must exit 0.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from refimpl.http.error_answers import to_response
from refimpl.http.serving.server import PooledWSGIServer
from refimpl.waiting.room import WaitingRoom

START_TIMEOUT = 120.0  # generous: a loaded machine imports slowly; only a hang fails
ROOT = Path(__file__).resolve().parents[2]
ADMIN = object()  # "use the admin token" (the default of every call)


@dataclass
class Server:
    """A running server and a small client for it."""

    process: subprocess.Popen
    url: str
    token: str
    data: Path
    log: Path
    lines: list[str] = field(default_factory=list)

    def request(
        self, method: str, path: str, *, token: Any = ADMIN, **kwargs: Any
    ) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if token is ADMIN:
            token = self.token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.url + path, headers=headers, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def exec(self, sql: str, db: str = "demo", token: Any = ADMIN) -> requests.Response:
        return self.post("/exec", params={"db": db}, data=sql.encode(), token=token)

    def sql(self, sql: str, db: str = "demo", token: Any = ADMIN) -> dict:
        """Run SQL that must succeed; the JSON answer."""
        response = self.exec(sql, db, token)
        assert response.status_code == 200, response.text
        return response.json()

    def rows(self, sql: str, db: str = "demo", token: Any = ADMIN) -> list[list]:
        return self.sql(sql, db, token)["dataset"]

    def new_token(self, user: str, db: str = "demo") -> str:
        return self.rows(f"CREATE TOKEN FOR {user}", db)[0][0]

    def memory_kb(self, field: str = "VmRSS") -> int:
        """The server process's resident memory now (`VmRSS`) or its peak so far (`VmHWM`),
        in kB (from /proc)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in the server's status: {status}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)

    def kill_during(self, send: Callable[[], requests.Response], delay: float) -> bool:
        """Runs `send` in a thread, SIGKILLs the server `delay` seconds later and returns
        whether `send` was answered 200 before that (an acknowledged write must survive)."""
        answers: list[requests.Response | requests.RequestException] = []

        def run() -> None:
            try:
                answers.append(send())
            except requests.RequestException as error:
                answers.append(error)

        sender = threading.Thread(target=run)
        try:
            sender.start()
            threading.Event().wait(delay)
        finally:
            self.stop(signal.SIGKILL)
            sender.join(130)
        return any(isinstance(a, requests.Response) and a.status_code == 200 for a in answers)


def _clean_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDB_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_refimpl(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m refimpl ARGS` as a user runs it from this checkout, with no `KDB_`
    variables but those of `env`, in `cwd`; what it printed, as text."""
    return subprocess.run(
        [sys.executable, "-m", "refimpl", *args],
        cwd=cwd,
        env={**_clean_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,  # a bound on a hang, not on the work
    )


def log_lines(server: Server, request_id: str, timeout: float = 10.0) -> list[dict]:
    """The JSON lines of one request in the log of a server started with `--log-format
    json` (waits for the line to be written)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(line) for line in server.log.read_text().splitlines() if line]
        found = [line for line in lines if line.get("request_id") == request_id]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def free_port() -> int:
    """A loopback port free now, for a server that must keep one port across restarts.

    It is taken below the kernel's range of ephemeral ports: a port of that range may, while
    the server restarts, become some client's own end of an outgoing connection (or a
    reconnecting client's, connected to itself), and the restarted server could not listen."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    lowest = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32768
    for _ in range(200):
        port = random.randrange(max(1024, lowest - 12000), lowest)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


@contextmanager
def pooled_server(app: Any) -> Iterator[PooledWSGIServer]:
    """`app` (a WSGI app) served in this process by a PooledWSGIServer of 2 workers on a free
    loopback port, while inside; shut down and drained at the end."""
    pooled = PooledWSGIServer("127.0.0.1", 0, app, threads=2)
    thread = threading.Thread(target=pooled.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield pooled
    finally:
        pooled.shutdown()
        pooled.drain()
        thread.join(10)


def start_server(data: Path, *extra: str) -> Server:
    command = [sys.executable, "-m", "refimpl", "serve", "--port", "0", "--data", str(data)]
    return spawn_server([*command, *extra], data)


@contextmanager
def running_server(data: Path, *extra: str) -> Iterator[Server]:
    """A server started as `start_server` starts it, for the block; at its end stopped with
    SIGTERM, from which it must exit 0 (the assertion shows its log's tail otherwise)."""
    running = start_server(data, *extra)
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, f"the server exited with {code}: {running.log.read_text()[-3000:]}"


@contextmanager
def timed_server(folder: Path, timeout_ms: int, *extra: str) -> Iterator[Server]:
    """`running_server` of a new data folder in `folder` whose `statement_timeout_ms` is
    `timeout_ms`; `extra`, its further flags."""
    data = folder / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(f"statement_timeout_ms = {timeout_ms}\n")
    with running_server(data, *extra) as running:
        yield running


@contextmanager
def deflating_server(folder: Path, heartbeat: float, more_settings: str = "") -> Iterator[Server]:
    """A server set to compress streams (heartbeats every `heartbeat` s, 10 streams a token
    and a user, and `more_settings`), holding an empty table t (id, name)."""
    data = folder / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(
        f"stream_heartbeat_s = {heartbeat}\nstreams_per_token = 10\nstreams_per_user = 10\n"
        f"stream_compression = deflate\n{more_settings}"
    )
    with running_server(data) as running:
        running.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        yield running


def spawn_server(command: list[str], data: Path) -> Server:
    """Runs `command` (a `refimpl serve`, or something that runs one and passes on what it
    prints) and waits until the server says where it listens; its admin token if it says it.
    The server's log goes beside its data folder."""
    log = data.parent / f"{data.name}-server.log"
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        env=_clean_environment(),
        cwd=data.parent,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    token = ""
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            process.kill()
            raise RuntimeError(f"the server did not start; it printed {seen}") from None
        if line is None:
            process.wait(5)
            raise RuntimeError(
                f"the server exited with {process.returncode}; it printed {seen} and logged"
                f" {log.read_text()[-3000:]}"
            )
        seen.append(line)
        if line.startswith("admin token: "):
            token = line.removeprefix("admin token: ").strip()
        match = re.match(r"listening on (http://\S+)$", line)
        if match:
            return Server(process, match.group(1), token, data, log, seen)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("server") / "data") as running:
        yield running


@pytest.fixture
def db(server: Server) -> str:
    """A fresh database for one test, so that tests sharing a server never meet."""
    name = "t_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {name}")
    return name


@pytest.fixture
def room() -> Iterator[WaitingRoom]:
    """A waiting room of the test's own, answering errors as the server does; closed after
    the test."""
    waiting = WaitingRoom(to_response)
    yield waiting
    waiting.close()
