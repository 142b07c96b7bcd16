"""`refimpl supervise operate`: the operator command of the conformance suite, for refimpl.

    refimpl supervise operate --state DIR VERB [ARGS]

The suite's operator steps (`refimpl conform --operator-cmd CMD`) act on the server under
test as its operator would; the runner runs `CMD VERB ARGS` and then waits for
`GET /health`. This is such a command for a server kept by `refimpl supervise serve
--state DIR`. The verbs (`spec/README.md` is their contract):

- `restart`, `crash`: the supervisor's graceful and hard restarts (`supervise restart`);
- `backup NAME`: `refimpl backup` of the server's data folder, while it runs, into the
  folder `backups/NAME` of DIR;
- `check NAME`: `refimpl check` of that backup (exit 0 sound, 1 damaged);
- `restore NAME`: the server stopped, that backup restored into a new data folder of DIR,
  and the server started on it with the same flags and ports;
- `set NAME [VALUE]`: the server restarted with the setting NAME as `KDB_<NAME>=VALUE`, or
  without a value back to its own configuration;
- `discard NAME`: the backup removed.

`restore` and `set` are carried out by the supervisor (it owns the server process): this
command writes the request into DIR, sends it SIGUSR2, and waits for its answer. Exit code
0 when the verb was carried out, 1 when it was refused or failed (the reason on stderr), 2
for a verb or argument this command does not know.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from refimpl.commands.backup import backup_data_folder, restore_data_folder
from refimpl.errors import StorageError

OPERATE_SIGNAL = signal.SIGUSR2
PID_FILE = "supervisor.pid"
GENERATION_FILE = "generation"  # counts the server's starts
REQUEST_FILE = "operate-request.json"
ANSWER_FILE = "operate-answer.json"
DATA_FILE = "data-folder"
BACKUPS = "backups"
# A backup's or a setting's name: one plain path part, so no name leaves DIR.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_POLL_S = 0.05
USAGE = (
    "verbs: restart, crash, backup NAME, check NAME, restore NAME, set NAME [VALUE], discard NAME"
)


Restart = Callable[[Path, str, float], int]


class Refused(Exception):
    """A request the operator cannot carry out; its message says why."""


def operate(state: Path, words: list[str], timeout: float, restart: Restart) -> int:
    """Carry out `VERB ARGS` on the server supervised in `state`; the exit code. `restart`
    is the supervisor's graceful or crash restart (`supervise.restart`)."""
    verb, args = (words[0], words[1:]) if words else ("", [])
    arity = {"restart": (0, 0), "crash": (0, 0), "set": (1, 2)}.get(verb, (1, 1))
    if verb not in ("restart", "crash", "backup", "check", "restore", "set", "discard") or not (
        arity[0] <= len(args) <= arity[1]
    ):
        print(f"supervise operate: {' '.join(words) or 'no verb'}? {USAGE}", file=sys.stderr)
        return 2
    if args and not _NAME.fullmatch(args[0]):
        print(f"supervise operate: {args[0]!r} is not a plain name", file=sys.stderr)
        return 2
    if verb in ("restart", "crash"):
        return restart(state, "graceful" if verb == "restart" else "crash", timeout)
    try:
        if verb in ("restore", "set"):
            return _ask_supervisor(state, {"verb": verb, "args": args}, timeout)
        backup = state / BACKUPS / args[0]
        if verb == "backup":
            print(backup_data_folder(current_data(state), backup))
        elif verb == "discard":
            shutil.rmtree(backup, ignore_errors=True)
        else:  # check: exactly as `refimpl check` says, its code passed on
            if not backup.is_dir():
                raise Refused(f"there is no backup {args[0]!r}")
            command = [sys.executable, "-m", "refimpl", "check", "--data", str(backup)]
            return subprocess.run(command, check=False).returncode
    except (Refused, StorageError, OSError) as exc:
        print(f"supervise operate {verb}: {exc}", file=sys.stderr)
        return 1
    return 0


def current_data(state: Path) -> Path:
    """The data folder the supervised server runs on now."""
    try:
        return Path((state / DATA_FILE).read_text().strip())
    except OSError:
        raise Refused(f"no supervisor in {state}") from None


def request_args(request: dict[str, object]) -> list[str]:
    """The arguments of a request, as text."""
    args = request.get("args")
    return [str(a) for a in args] if isinstance(args, list) else []


def restore(state: Path, request: dict[str, object], generation: int) -> Path:
    """In the supervisor, with its server stopped: carry out a `restore`; the data folder the
    server starts on next. Raises Refused (the server then starts on its old folder)."""
    args = request_args(request) or [""]
    backup = state / BACKUPS / args[0]
    if not backup.is_dir():
        raise Refused(f"there is no backup {args[0]!r}")
    restored = state / f"data-{generation}"
    try:
        print(restore_data_folder(backup, restored), flush=True)
    except StorageError as exc:
        raise Refused(str(exc)) from None
    return restored.resolve()


def read_request(state: Path) -> dict[str, object]:
    """The request `operate` left for the supervisor ({} when it is unreadable)."""
    try:
        request = json.loads((state / REQUEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return request if isinstance(request, dict) else {}


def write_answer(state: Path, generation: int, error: str | None) -> None:
    """The supervisor's answer to a request: the generation it started, and what failed."""
    answer = {"generation": generation, "error": error}
    part = state / (ANSWER_FILE + ".part")
    part.write_text(json.dumps(answer))
    part.replace(state / ANSWER_FILE)  # never read half written


def _ask_supervisor(state: Path, request: dict[str, object], timeout: float) -> int:
    try:
        pid = int((state / PID_FILE).read_text())
        before = int((state / GENERATION_FILE).read_text())
    except (OSError, ValueError):
        raise Refused(f"no supervisor in {state}") from None
    (state / ANSWER_FILE).unlink(missing_ok=True)
    (state / REQUEST_FILE).write_text(json.dumps(request))
    try:
        os.kill(pid, OPERATE_SIGNAL)
    except ProcessLookupError:
        raise Refused(f"the supervisor (pid {pid}) is not running") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = json.loads((state / ANSWER_FILE).read_text())
        except (OSError, ValueError):
            time.sleep(_POLL_S)
            continue
        if int(answer.get("generation", 0)) > before:
            if answer.get("error"):
                raise Refused(str(answer["error"]))
            return 0
        time.sleep(_POLL_S)
    raise Refused(f"the supervisor did not answer within {timeout:g} s")
