"""A server started from a (mutated) copy of refimpl, restartable by the conformance runner.

`MutantServer` runs the copy's supervisor (`refimpl supervise`, which keeps a `refimpl
serve` on one port across restarts) with the copy's folder as working directory and on
PYTHONPATH, so `python -m refimpl` there imports the copy, never the checkout. The server
gets `--sample`, free ports (HTTP and the PostgreSQL protocol) and a fresh data folder;
`restart_command` gives the runner's `--restart-cmd` and `--crash-cmd`, `operator_command`
its `--operator-cmd` and `start_command` its `--start-cmd`, each of the copy.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

SUPERVISOR = [sys.executable, "-m", "refimpl", "supervise"]
START_TIMEOUT = 600.0  # a --sample start on a loaded shared machine takes minutes
STOP_TIMEOUT = 40.0
_LISTENING = re.compile(r"listening on (http://\S+)$")
_POSTGRES = re.compile(r"postgres on (\S+:\d+)$")


def _free_port() -> int:
    """A free TCP port (kept across the copy's restarts, as the protocol's address must)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerFailed(RuntimeError):
    """The server did not start (or did not stop) as it should."""


class MutantServer:
    """`refimpl serve --sample` from `code`, its data and state under `work`, restartable."""

    def __init__(self, code: Path, work: Path) -> None:
        self.code = code
        self.data = work / "data"
        self.state = work / "supervisor"
        self.log = work / "server.log"
        self.url = ""
        self.token = ""
        self.pg_address = ""  # HOST:PORT of its PostgreSQL protocol
        self._process: subprocess.Popen[str] | None = None

    def restart_command(self, kind: str) -> str:
        """The shell command that restarts the server (`kind`: graceful or crash)."""
        words = [*SUPERVISOR, "restart", "--state", str(self.state), kind]
        return " ".join(shlex.quote(word) for word in words)

    def operator_command(self) -> str:
        """The runner's `--operator-cmd`: the copy's own `refimpl supervise operate`."""
        return self._of_the_copy([*SUPERVISOR, "operate", "--state", str(self.state)])

    def start_command(self) -> str:
        """The runner's `--start-cmd`: a server of the copy for examples with settings."""
        return self._of_the_copy([*SUPERVISOR, "start", "--access-of", str(self.data)])

    def _of_the_copy(self, words: list[str]) -> str:
        # The runner's environment has no PYTHONPATH: the command names the copy itself.
        copy = shlex.quote(str(self.code))
        return f"cd {copy} && PYTHONPATH={copy} " + " ".join(shlex.quote(w) for w in words)

    def start(self) -> None:
        """Start it and wait until it listens; ServerFailed (with its log) when it does not."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KDB_")}
        env["PYTHONPATH"] = str(self.code)
        env["PYTHONUNBUFFERED"] = "1"
        command = [
            *SUPERVISOR,
            "serve",
            "--state",
            str(self.state),
            "--",
            "--sample",
            "--data",
            str(self.data),
            "--pg-port",
            str(_free_port()),
        ]
        with self.log.open("w", encoding="utf-8") as errors:
            self._process = subprocess.Popen(
                command,
                cwd=self.code,
                env=env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._relay, args=(self._process, lines), daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                self.stop()
                raise ServerFailed(
                    f"the server did not listen within {START_TIMEOUT:.0f} s"
                ) from None
            if line is None:
                self._process.wait()
                raise ServerFailed(
                    f"the server exited with {self._process.returncode} at its start"
                )
            if line.startswith("admin token: "):
                self.token = line.removeprefix("admin token: ").strip()
            postgres = _POSTGRES.search(line)
            if postgres:
                self.pg_address = postgres.group(1)
            found = _LISTENING.search(line)
            if found:
                self.url = found.group(1)
                return

    def stop(self) -> int | None:
        """Stop the supervisor and its server (SIGTERM); the exit code, None if gone."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise ServerFailed(f"the server did not stop within {STOP_TIMEOUT:.0f} s") from None

    def log_tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""

    def _relay(self, process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        """What the server prints, to `lines` and the log (read to its end: never blocks it)."""
        assert process.stdout is not None
        with self.log.open("a", encoding="utf-8") as copy:
            for line in process.stdout:
                copy.write(line)
                copy.flush()
                lines.put(line.rstrip("\n"))
        lines.put(None)
