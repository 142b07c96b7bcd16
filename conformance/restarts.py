"""Server restarts between the steps of an example, through commands the user gives.

The runner cannot restart a server it did not start, so `refimpl conform` takes the shell
commands that do: `--restart-cmd` for a graceful restart (the server stops as it would at
SIGTERM, then starts again on the same data and address) and `--crash-cmd` for a hard one
(killed without warning, as by SIGKILL or a power cut, then started again). A command
returns once the old server is gone; the runner then waits until `GET /health` answers 200
before the example goes on. Examples that restart need the command of each kind they use,
and are skipped, with that reason, without it.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Any

import requests

from conformance.transport import StepFailure

RESTART_FLAGS = {"graceful": "--restart-cmd", "crash": "--crash-cmd"}
_HEALTH_POLL_S = 0.1


@dataclass(frozen=True)
class RestartCommands:
    """The shell commands that restart the server (None: not possible), and how long a
    restart may take, the command and the wait for `/health` together."""

    graceful: str | None = None
    crash: str | None = None
    timeout: float = 60.0

    def command(self, kind: str) -> str | None:
        """The command of a restart kind (`graceful` or `crash`)."""
        return self.graceful if kind == "graceful" else self.crash


def restart_kinds(steps: list[dict[str, Any]]) -> list[str]:
    """The restart kinds the steps use, each once, in the order of first use."""
    kinds: list[str] = []
    for step in steps:
        kind = step.get("restart")
        if isinstance(kind, str) and kind not in kinds:
            kinds.append(kind)
    return kinds


def missing_commands(steps: list[dict[str, Any]], commands: RestartCommands) -> str:
    """Why steps cannot run with these commands ("" when they can): a skip reason."""
    missing = [kind for kind in restart_kinds(steps) if not commands.command(kind)]
    if not missing:
        return ""
    flags = " and ".join(RESTART_FLAGS[kind] for kind in missing)
    kinds = " and ".join(missing)
    return f"the example restarts the server ({kinds}): run the suite with {flags}"


def restart_server(kind: str, commands: RestartCommands, base_url: str) -> float:
    """Run the command of `kind` and wait for `GET /health`; the seconds it took.

    Raises StepFailure when the command fails or the server does not answer in time.
    """
    command = commands.command(kind)
    if not command:
        raise StepFailure(f"no {RESTART_FLAGS[kind]} was given for a {kind} restart")
    started = time.monotonic()
    deadline = started + commands.timeout
    try:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=commands.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise StepFailure(
            f"the {RESTART_FLAGS[kind]} command did not finish within {commands.timeout:g} s"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-500:]
        raise StepFailure(
            f"the {RESTART_FLAGS[kind]} command exited with {done.returncode}: {said}"
        )
    wait_for_health(base_url, deadline, f"the {kind} restart")
    return time.monotonic() - started


def wait_for_health(base_url: str, deadline: float, after: str) -> None:
    """Wait until `GET /health` answers 200 (StepFailure at the monotonic `deadline`)."""
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            health = requests.get(base_url + "/health", timeout=2.0)
            if health.status_code == 200:
                return
            last = f"HTTP {health.status_code}"
        except requests.RequestException as exc:
            last = type(exc).__name__
        time.sleep(_HEALTH_POLL_S)
    raise StepFailure(f"after {after} GET /health did not answer 200 in time (last: {last})")
