"""Servers started for the examples that need settings of their own (`--start-cmd`).

An example may state the server settings it needs (`"settings": {"stream_heartbeat_s": 1}`),
so that a rule about time can be tested in seconds. The runner starts such examples on a
server of their own: it runs the `--start-cmd` shell command with each setting as an
environment variable `KDB_<NAME>` (upper case), reads the first line the command prints,
`URL [HOST:PORT]` (the URL it serves, and the PostgreSQL protocol's address where it has
one), waits for `GET /health`, runs the examples of those settings there with the same
admin token, and stops the command with SIGTERM (SIGKILL after 30 s). Without a
`--start-cmd` such examples are skipped, with the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests

ENV_PREFIX = "KDB_"
STOP_WAIT_S = 30.0
NO_START_CMD = "the example needs server settings ({}): run the suite with --start-cmd CMD"


class StartFailed(Exception):
    """The start command did not give a server that answers; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class StartedServer:
    """Where a started server answers."""

    url: str
    pg_address: str | None


def settings_key(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Settings as a sorted, hashable key: examples of equal settings share a server."""
    return tuple(sorted((str(k), _text(v)) for k, v in settings.items()))


def describe(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in settings_key(settings))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextmanager
def started(command: str, settings: Mapping[str, Any], timeout: float) -> Iterator[StartedServer]:
    """Run `command` with the settings in its environment, for as long as the block runs."""
    env = dict(os.environ)
    env.update({ENV_PREFIX + k.upper(): v for k, v in settings_key(settings)})
    # What the command logs is kept apart (the runner's own output stays readable) and
    # shown when it fails to start.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        process = subprocess.Popen(
            command,
            shell=True,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # SIGTERM reaches what the shell started, too
        )
        try:
            try:
                server = _first_line(process, command, timeout)
                _wait_for_health(server.url, timeout)
            except StartFailed as failure:
                log.seek(0)
                tail = log.read()[-1500:].strip()
                said = f"; it logged: {tail}" if tail else ""
                raise StartFailed(failure.message + said) from None
            yield server
        finally:
            _stop(process)


def _first_line(process: subprocess.Popen[str], command: str, timeout: float) -> StartedServer:
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.append(process.stdout.readline())
        for _ in process.stdout:  # keep the pipe drained while the server runs
            pass

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not lines and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    words = lines[0].split() if lines else []
    if not words or not words[0].startswith(("http://", "https://")):
        said = repr(lines[0].strip()) if lines else "nothing"
        raise StartFailed(
            f"--start-cmd {command!r} printed {said} as its first line within {timeout:g} s;"
            " it must print the URL it serves (and HOST:PORT of its PostgreSQL protocol)"
        )
    return StartedServer(words[0].rstrip("/"), words[1] if len(words) > 1 else None)


def _wait_for_health(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise StartFailed(f"the server --start-cmd started at {url} did not answer GET /health")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
