"""`RefimplServer`: `python -m refimpl serve` on loopback in its own process, optionally under
a launcher (`PROFILE_LAUNCHER`, or the caller's); and `trades_csv`, a bulk import's body."""

from __future__ import annotations

import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from harness.places import LOOPBACK, REPO
from harness.started import Started

# Runs `refimpl serve` with each worker thread's request handling under a cProfile.Profile of
# its own, merged into one file at the stop. `python -m cProfile -m refimpl serve` alone
# profiles the main thread only (the accept loop), never the threads that answer requests.
PROFILE_LAUNCHER = """
import cProfile, pstats, sys, threading
from refimpl.http.serving import server
out = sys.argv[1]
profiles, local = [], threading.local()
answer = server.PooledWSGIServer._answer
def profiled(self, *args):
    profile = getattr(local, "profile", None)
    if profile is None:
        profile = local.profile = cProfile.Profile()
        profiles.append(profile)
    profile.enable()
    try:
        return answer(self, *args)
    finally:
        profile.disable()
server.PooledWSGIServer._answer = profiled
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    if profiles:
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            stats.add(profile)
        stats.dump_stats(out)
sys.exit(status)
"""


class RefimplServer(Started):
    """`python -m refimpl serve` on loopback, in its own process; a context manager."""

    def __init__(
        self,
        threads: int = 16,
        *,
        data: Path | None = None,
        sample: bool = False,
        profile: Path | None = None,
        env: dict[str, str] | None = None,
        extra: Sequence[str] = (),
        launcher: str | None = None,
        code: Path | None = None,
    ) -> None:
        self.threads = threads
        # The checkout whose refimpl runs (another revision's, in `versions.py`); this one's
        # by default.
        self.code = REPO if code is None else Path(code)
        self._own_data = data is None
        self.data = Path(tempfile.mkdtemp(prefix="kdb-bench-")) if data is None else Path(data)
        self.sample = sample
        self.profile = profile
        # With `profile`: the code that starts the server (its first argument is that path).
        self.launcher = launcher or PROFILE_LAUNCHER
        self.env = env or {}
        self.extra = list(extra)
        self.process: subprocess.Popen[str] | None = None
        self.token = ""
        self.url = ""
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    # -- life ------------------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> RefimplServer:
        args = [
            "serve",
            "--data",
            str(self.data),
            "--host",
            LOOPBACK,
            "--port",
            "0",
            "--threads",
            str(self.threads),
            *self.extra,
        ]
        if self.sample:
            args.append("--sample")
        if self.profile is not None:
            command = [sys.executable, "-c", self.launcher, str(self.profile), *args]
        else:
            command = [sys.executable, "-m", "refimpl", *args]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.code), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        env.update(self.env)
        self.process = subprocess.Popen(
            command,
            cwd=self.code,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        token_file = self.data / "admin.token"
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while not self.url:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server stopped before listening:\n" + "".join(self.output))
            self.output.append(line)
            if line.startswith("admin token: "):
                self.token = line.split(":", 1)[1].strip()
            elif line.startswith("listening on "):
                self.url = line.split("listening on ", 1)[1].strip()
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not listen in time")
        if not self.token and token_file.exists():
            self.token = token_file.read_text().strip()  # a reused data folder
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            del self.output[:-200]

    def stop(self, timeout: float = 120.0, delete: bool = True) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.process = None
        if delete and self._own_data:
            shutil.rmtree(self.data, ignore_errors=True)

    # -- use -------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def sql(self, text: str, session: requests.Session | None = None) -> dict[str, Any]:
        """Run SQL through POST /exec; the JSON answer, or RuntimeError with the server's."""
        http = session or requests
        response = http.post(
            f"{self.url}/exec",
            data=text.encode("utf-8"),
            headers={**self.headers, "Content-Type": "text/plain"},
            timeout=600,
        )
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:500]}")
        return response.json()

    def import_csv(self, table: str, text: str) -> dict[str, Any]:
        response = requests.post(
            f"{self.url}/imp",
            params={"table": table},
            data=text.encode("utf-8"),
            headers={**self.headers, "Content-Type": "text/csv"},
            timeout=3600,
        )
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:500]}")
        return response.json()

    def stats(self) -> dict[str, Any]:
        response = requests.get(f"{self.url}/api/stats", headers=self.headers, timeout=60)
        response.raise_for_status()
        return response.json()


def trades_csv(rows: int) -> bytes:
    """A bulk import's body: `rows` trades of 100 symbols, 10 ms apart, from 2026-01-05."""
    base = datetime.datetime(2026, 1, 5, tzinfo=datetime.UTC).timestamp()
    lines = ["time,symbol,price,qty\n"]
    for i in range(rows):
        stamp = datetime.datetime.fromtimestamp(base + i * 0.01, datetime.UTC)
        lines.append(
            f"{stamp:%Y-%m-%dT%H:%M:%S.%fZ},S{i % 100:03d},{100 + i % 997 * 0.1:.1f},{i % 50 + 1}\n"
        )
    return "".join(lines).encode()
