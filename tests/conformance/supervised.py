"""A real refimpl server kept by tools/supervise.py, so that the suite can restart it.

`start_supervised` starts the supervisor as a user would and reads the admin token and the
address from what the server prints (the supervisor passes it on); `restart_commands` are
the `--restart-cmd` and `--crash-cmd` that restart it. `Server.stop()` (SIGTERM to the
supervisor) stops the server and returns its exit code.
"""

from __future__ import annotations

import queue
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

from tests.http.conftest import START_TIMEOUT, Server, _clean_environment

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = ROOT / "tools" / "supervise.py"


def start_supervised(data: Path, state: Path, *flags: str) -> Server:
    """A supervised `refimpl serve --data DATA FLAGS...` on a free port, once it listens."""
    log = data.parent / f"{data.name}-server.log"
    process = subprocess.Popen(
        [sys.executable, str(SUPERVISE), "serve", "--state", str(state), "--",
         "--data", str(data), *flags],
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        env=_clean_environment(),
        cwd=data.parent,
        text=True,
    )  # fmt: skip
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
            raise RuntimeError(f"the supervisor exited; it printed {seen}: {log.read_text()}")
        seen.append(line)
        if line.startswith("admin token: "):
            token = line.removeprefix("admin token: ").strip()
        found = re.match(r"listening on (http://\S+)$", line)
        if found:
            return Server(process, found.group(1), token, data, log, seen)


def restart_commands(state: Path) -> list[str]:
    """`--restart-cmd CMD --crash-cmd CMD` for the supervisor keeping its state in `state`."""
    def command(kind: str) -> str:
        words = [sys.executable, str(SUPERVISE), "restart", "--state", str(state), kind]
        return " ".join(shlex.quote(w) for w in words)

    return ["--restart-cmd", command("graceful"), "--crash-cmd", command("crash")]
