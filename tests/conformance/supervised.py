"""A real refimpl server kept by `refimpl supervise`, so that the suite can restart it.

`start_supervised` starts the supervisor as a user would and reads the admin token and the
address from what the server prints (the supervisor passes it on); `restart_commands` are
the `--restart-cmd` and `--crash-cmd` that restart it, `operator_command` the
`--operator-cmd` that backs it up, restores it and changes its settings. `Server.stop()`
(SIGTERM to the supervisor) stops the server and returns its exit code.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.http.conftest import Server, spawn_server

SUPERVISE = [sys.executable, "-m", "refimpl", "supervise"]


def start_supervised(data: Path, state: Path, *flags: str) -> Server:
    """A supervised `refimpl serve --data DATA FLAGS...` on a free port, once it listens."""
    command = [
        *SUPERVISE,
        "serve",
        "--state",
        str(state),
        "--",
        "--data",
        str(data),
        *flags,
    ]
    return spawn_server(command, data)


def restart_commands(state: Path) -> list[str]:
    """`--restart-cmd CMD --crash-cmd CMD` for the supervisor keeping its state in `state`."""

    def command(kind: str) -> str:
        words = [*SUPERVISE, "restart", "--state", str(state), kind]
        return " ".join(shlex.quote(w) for w in words)

    return ["--restart-cmd", command("graceful"), "--crash-cmd", command("crash")]


def operator_command(state: Path) -> str:
    """`--operator-cmd CMD` for the supervisor keeping its state in `state`."""
    words = [*SUPERVISE, "operate", "--state", str(state)]
    return " ".join(shlex.quote(w) for w in words)


def start_command(data: Path) -> str:
    """`--start-cmd CMD`: a throwaway server taking the users and tokens of `data`'s."""
    words = [*SUPERVISE, "start", "--access-of", str(data)]
    return " ".join(shlex.quote(w) for w in words)
