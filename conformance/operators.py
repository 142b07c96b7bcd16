"""Operator steps: an example acts on the server as its operator would (`--operator-cmd`).

Some rules are about what an operator does to a server, not about a request: a backup taken
while it runs, a restore that starts new timelines, a setting changed and the server
restarted. The runner cannot do these to a server it did not start, so `refimpl conform`
takes a shell command that can, `--operator-cmd CMD`, and runs `CMD VERB ARGS` (each word
shell-quoted) for a step `{"operator": VERB, "args": [...], "exit": N}`. The step passes
when the command exits with `exit` (default 0); the runner then waits for `GET /health`
before the next step, as after a restart. The verbs (`spec/README.md` is their contract):

- `restart`: stops the server as a normal shutdown does, starts it again on the same data;
- `crash`: kills the server without warning (as SIGKILL), starts it again;
- `backup NAME`: takes a backup of the whole server (every database, the users and grants)
  while it runs, kept as NAME;
- `check NAME`: checks the backup NAME: exit 0 when it is sound, 1 when it is damaged;
- `restore NAME`: stops the server, replaces its data with the backup NAME restored (a new
  timeline of LSNs for each database), starts it again at the same addresses;
- `set NAME [VALUE]`: restarts the server with the setting NAME at VALUE, or, without a
  VALUE, at its own configuration;
- `discard NAME`: removes the backup NAME.

An example leaves the server as it found it: after it, also after a failure, the runner
runs `discard NAME` for every backup it took and `set NAME` for every setting it changed.
Without `--operator-cmd` an example with operator steps is skipped, with the reason.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from conformance.restarts import wait_for_health
from conformance.transport import StepFailure

# Each verb's least and most number of arguments.
VERBS: dict[str, tuple[int, int]] = {
    "restart": (0, 0),
    "crash": (0, 0),
    "backup": (1, 1),
    "check": (1, 1),
    "restore": (1, 1),
    "set": (1, 2),
    "discard": (1, 1),
}
NO_OPERATOR_CMD = (
    "the example acts on the server as its operator ({}): run the suite with --operator-cmd CMD"
)


def operator_verbs(steps: list[dict[str, Any]]) -> list[str]:
    """The operator verbs the steps use, each once, in the order of first use."""
    verbs: list[str] = []
    for step in steps:
        verb = step.get("operator")
        if isinstance(verb, str) and verb not in verbs:
            verbs.append(verb)
    return verbs


def check_operator_step(step: dict[str, Any], here: str) -> str | None:
    """What is wrong with an operator step (None: nothing), for the case file's loader."""
    verb = step.get("operator")
    args = step.get("args", [])
    if verb not in VERBS:
        return f"{here}: 'operator' is one of {', '.join(VERBS)}"
    least, most = VERBS[verb]
    if not isinstance(args, list) or not all(isinstance(a, str | int) for a in args):
        return f"{here}: an operator step's 'args' is a list of words"
    if not least <= len(args) <= most:
        wanted = str(least) if least == most else f"{least} or {most}"
        return f"{here}: the operator verb {verb!r} takes {wanted} argument(s)"
    if not isinstance(step.get("exit", 0), int):
        return f"{here}: an operator step's 'exit' is the exit code expected, an integer"
    unknown = set(step) - {"operator", "args", "exit"}
    if unknown:
        return f"{here}: an operator step has no {', '.join(sorted(map(repr, unknown)))}"
    return None


@dataclass
class Operator:
    """Runs one example's operator steps through `command`, and undoes what they left."""

    command: str
    base_url: str
    timeout: float = 120.0
    backups: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)

    def step(self, verb: str, args: list[str], exit_code: int, where: str) -> None:
        """Run `CMD VERB ARGS`, check its exit code, wait for `GET /health`."""
        deadline = time.monotonic() + self.timeout
        code, said = self._run([verb, *args], where)
        if verb == "backup" and code == 0:
            self.backups.append(args[0])
        if verb == "set" and code == 0:
            # A setting set back to the server's own configuration needs no undoing.
            if len(args) > 1 and args[0] not in self.settings:
                self.settings.append(args[0])
            elif len(args) == 1 and args[0] in self.settings:
                self.settings.remove(args[0])
        if code != exit_code:
            raise StepFailure(
                f"{where}: the operator command {verb} {' '.join(args)} exited with {code},"
                f" not {exit_code}: {said}",
                request=self._line([verb, *args]),
            )
        wait_for_health(self.base_url, deadline, f"the operator step {verb}")

    def undo(self) -> None:
        """Discard the backups the example took and set its settings back; never raises."""
        for name in self.settings:
            try:
                self._run(["set", name], "after the example")
                wait_for_health(self.base_url, time.monotonic() + self.timeout, "set")
            except StepFailure:
                pass  # the example's own verdict stands
        for name in self.backups:
            try:
                self._run(["discard", name], "after the example")
            except StepFailure:
                pass
        self.settings.clear()
        self.backups.clear()

    def _line(self, words: list[str]) -> str:
        return f"{self.command} {shlex.join(words)}"

    def _run(self, words: list[str], where: str) -> tuple[int, str]:
        try:
            done = subprocess.run(
                self._line(words),
                shell=True,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise StepFailure(
                f"{where}: the operator command {' '.join(words)} did not finish within"
                f" {self.timeout:g} s",
                request=self._line(words),
            ) from None
        return done.returncode, (done.stderr or done.stdout).strip()[-500:]
