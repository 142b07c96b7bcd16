"""`refimpl supervise start`: a throwaway server for the suite's examples with settings.

    refimpl supervise start --access-of DATA [-- more `refimpl serve` flags]

An example that needs server settings (a 1 s heartbeat, a 2 s ticket lifetime) runs on a
server the suite starts with `--start-cmd CMD`, the settings given as `KDB_<NAME>`
environment variables. This is such a command for refimpl: it serves a fresh data folder
(removed when it stops) that holds a copy of DATA's `access.json`, so the admin token of
the server DATA belongs to is the admin token here too, on free ports for HTTP and the
PostgreSQL protocol. Its first line on standard output is what the suite reads: the URL
it serves and the protocol's address (`http://127.0.0.1:PORT 127.0.0.1:PGPORT`). SIGTERM or
SIGINT stop it gracefully; it exits with the server's code.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

ACCESS_FILE = "access.json"
STOP_WAIT_S = 30.0
START_WAIT_S = 120.0
_LISTENING = re.compile(r"listening on (http://\S+)$")
_POSTGRES = re.compile(r"postgres on (\S+:\d+)$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `refimpl supervise start`."""
    parser.add_argument(
        "--access-of",
        type=Path,
        required=True,
        metavar="DATA",
        help="the data folder whose users and tokens (access.json) the new server takes",
    )
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="-- then `refimpl serve` flags")


def start(access_of: Path, serve_flags: list[str]) -> int:
    """Serve until SIGTERM or SIGINT; the server's exit code (1 when it did not start)."""
    source = access_of / ACCESS_FILE
    if not source.is_file():
        print(f"supervise start: no {ACCESS_FILE} in {access_of}", file=sys.stderr)
        return 1
    folder = Path(tempfile.mkdtemp(prefix="kdb-suite-"))
    try:
        data = folder / "data"
        data.mkdir()
        shutil.copy2(source, data / ACCESS_FILE)
        command = [sys.executable, "-m", "refimpl", "serve", "--data", str(data)]
        command += ["--port", "0", "--pg-port", "0", *serve_flags]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
        stop = threading.Event()

        def stopping(_number: int, _frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, stopping)
        signal.signal(signal.SIGINT, stopping)
        if not _announce(process):
            return _end(process)
        while not stop.wait(0.1):
            if process.poll() is not None:
                return process.returncode
        return _end(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _announce(process: subprocess.Popen[str]) -> bool:
    """Print `URL HOST:PORT` once the server said both; False when it exited first."""
    assert process.stdout is not None
    url = pg = None
    found = threading.Event()

    def read() -> None:
        nonlocal url, pg
        assert process.stdout is not None
        for line in process.stdout:
            text = line.rstrip("\n")
            url = url or _first(_LISTENING, text)
            pg = pg or _first(_POSTGRES, text)
            if url and pg and not found.is_set():
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    found.wait(START_WAIT_S)
    if not (url and pg):
        print("supervise start: the server did not say where it listens", file=sys.stderr)
        return False
    print(f"{url} {pg}", flush=True)
    return True


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


def _end(process: subprocess.Popen[str]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
