"""Keep a `refimpl serve` running across restarts, for the conformance suite's restart steps.

    refimpl supervise serve --state DIR -- --data D [more `refimpl serve` flags]
    refimpl supervise restart --state DIR graceful|crash
    refimpl supervise start --access-of DATA [-- more `refimpl serve` flags]
    refimpl supervise operate --state DIR VERB [ARGS]

(`start`, a throwaway server for the suite's examples with settings, is `suite_server`;
`operate`, the suite's operator command, is `suite_operator`.)

It ships in the package, so that an implementer who installed the wheel (no checkout) has
the restart commands the suite's restart examples need.

`serve` starts `python -m refimpl serve` with the flags after `--`, on the port given by
`--port` there (default 0: a free one, kept for every later start), relays what the server
prints to its own output, and waits for signals: SIGHUP restarts the server gracefully
(SIGTERM, then a new start on the same data folder and port), SIGUSR1 crashes it (SIGKILL,
then the same start), SIGTERM or SIGINT stop it and end the supervisor with the server's
exit code. A server that exits on its own ends the supervisor too, with its code. SIGUSR2
carries out the request `operate` left in DIR (a restore, a setting changed) with the server
stopped, then starts it again.

`restart` signals the supervisor of DIR and returns once the old server is gone and the new
one started (it may not answer yet: the suite then waits for `GET /health`), so that these
are the commands `refimpl conform` takes:

    refimpl conform --url URL --token T \\
        --restart-cmd 'refimpl supervise restart --state DIR graceful' \\
        --crash-cmd 'refimpl supervise restart --state DIR crash'
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from refimpl.commands import suite_operator, suite_server

PID_FILE = suite_operator.PID_FILE
GENERATION_FILE = suite_operator.GENERATION_FILE
SIGNALS = {"graceful": signal.SIGHUP, "crash": signal.SIGUSR1}
STOP_WAIT_S = 30.0
_LISTENING_RE = re.compile(r"listening on http://\S+:(\d+)$")
_POLL_S = 0.05


class Supervisor:
    """One server process at a time, restarted on the signals the module docstring names."""

    def __init__(self, state: Path, serve_flags: list[str]) -> None:
        self.state = state
        self.flags, self.port = split_port(serve_flags)
        self.data, self.flags = split_data(self.flags)
        self.env: dict[str, str] = {}  # settings an operator step changed (`set`)
        self.wanted: list[str] = []
        self.generation = 0
        self.process: subprocess.Popen[str] | None = None
        self._port_known = threading.Event()
        self._listening = threading.Event()  # the server started last listens

    def run(self) -> int:
        """Serve until told to stop or the server exits on its own; its exit code."""
        self.state.mkdir(parents=True, exist_ok=True)
        for kind, number in SIGNALS.items():
            signal.signal(number, self._wanting(kind))
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, self._wanting("stop"))
        signal.signal(suite_operator.OPERATE_SIGNAL, self._wanting("operate"))
        (self.state / PID_FILE).write_text(f"{os.getpid()}\n")
        self._start()
        while True:
            time.sleep(_POLL_S)
            assert self.process is not None
            # A restart asked for before the first server said its port waits for it.
            if self.wanted and (self.wanted[0] == "stop" or self._port_known.is_set()):
                kind = self.wanted.pop(0)
                if kind == "stop":
                    return self._stop(signal.SIGTERM)
                if kind == "operate":
                    self._operate()
                    continue
                self._stop(signal.SIGTERM if kind == "graceful" else signal.SIGKILL)
                self._start()
                continue
            code = self.process.poll()
            if code is not None:
                return code

    def _wanting(self, kind: str) -> Callable[[int, FrameType | None], None]:
        def handler(_number: int, _frame: FrameType | None) -> None:
            # Only noted here: the main loop acts on it between its sleeps.
            self.wanted.append(kind)

        return handler

    def _operate(self) -> None:
        """Carry out `operate`'s request with the server stopped, start it, and answer."""
        request = suite_operator.read_request(self.state)
        args = suite_operator.request_args(request)
        self._stop(signal.SIGTERM)
        error = None
        before = (self.data, dict(self.env))
        try:
            if request.get("verb") == "restore":
                self.data = suite_operator.restore(self.state, request, self.generation + 1)
            elif request.get("verb") == "set" and args:
                name = "KDB_" + args[0].upper()
                if len(args) > 1:
                    self.env[name] = args[1]
                else:
                    self.env.pop(name, None)
            else:
                error = f"no such request: {request!r}"
        except suite_operator.Refused as refused:
            error = str(refused)
        self._start()
        if not self._listens():
            # A value the server refuses must not end the supervisor: it serves as before.
            error = f"the server did not start after {' '.join(map(str, args))!r}"
            self.data, self.env = before
            self._start()
        suite_operator.write_answer(self.state, self.generation, error)

    def _listens(self) -> bool:
        """Wait until the server just started listens (True) or exits (False)."""
        assert self.process is not None
        while self.process.poll() is None:
            if self._listening.wait(_POLL_S):
                return True
        return self._listening.is_set()

    def _start(self) -> None:
        command = [sys.executable, "-m", "refimpl", "serve", "--port", str(self.port)]
        command += ["--data", str(self.data)]
        self._listening = threading.Event()
        self.process = subprocess.Popen(
            [*command, *self.flags],
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, **self.env},
        )
        (self.state / suite_operator.DATA_FILE).write_text(f"{self.data}\n")
        threading.Thread(
            target=self._relay, args=(self.process, self._listening), daemon=True
        ).start()
        self.generation += 1
        (self.state / GENERATION_FILE).write_text(f"{self.generation}\n")

    def _relay(self, process: subprocess.Popen[str], listening: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            found = _LISTENING_RE.search(line.rstrip("\n"))
            if found:
                listening.set()
            if found and not self._port_known.is_set():
                self.port = int(found.group(1))
                self._port_known.set()
            sys.stdout.write(line)
            sys.stdout.flush()

    def _stop(self, number: int) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(number)
        try:
            return self.process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _split_flag(flags: list[str], name: str) -> tuple[list[str], str | None]:
    """The flags without `name VALUE` or `name=VALUE`, and the last VALUE (None when not
    given)."""
    rest: list[str] = []
    value = None
    items = iter(flags)
    for flag in items:
        if flag == name:
            value = next(items)
        elif flag.startswith(f"{name}="):
            value = flag.split("=", 1)[1]
        else:
            rest.append(flag)
    return rest, value


def split_port(flags: list[str]) -> tuple[list[str], int]:
    """The flags without `--port N`, and N (0 when not given)."""
    rest, port = _split_flag(flags, "--port")
    return rest, 0 if port is None else int(port)


def split_data(flags: list[str]) -> tuple[Path, list[str]]:
    """The data folder `--data D` names (absolute; default $KDB_DATA, else ./kdb-data), and
    the other flags."""
    rest, data = _split_flag(flags, "--data")
    if data is None:
        data = os.environ.get("KDB_DATA", "kdb-data")
    return Path(data).resolve(), rest


def restart(state: Path, kind: str, timeout: float) -> int:
    """Signal the supervisor of `state` and wait until it started the server again."""
    try:
        pid = int((state / PID_FILE).read_text())
        before = int((state / GENERATION_FILE).read_text())
    except (OSError, ValueError) as exc:
        print(f"supervise: no supervisor in {state}: {exc}", file=sys.stderr)
        return 1
    try:
        os.kill(pid, SIGNALS[kind])
    except ProcessLookupError:
        print(f"supervise: the supervisor (pid {pid}) is not running", file=sys.stderr)
        return 1
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if int((state / GENERATION_FILE).read_text()) > before:
                return 0
        except (OSError, ValueError):
            pass  # read while being written; look again
        time.sleep(_POLL_S)
    print(f"supervise: no new server within {timeout:g} s", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="refimpl supervise", description=(__doc__ or "").splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run and supervise a server")
    serve.add_argument("--state", type=Path, required=True, help="a folder for the pid file")
    serve.add_argument("flags", nargs=argparse.REMAINDER, help="-- then `refimpl serve` flags")
    again = commands.add_parser("restart", help="restart the supervised server")
    again.add_argument("--state", type=Path, required=True)
    again.add_argument("kind", choices=sorted(SIGNALS))
    again.add_argument("--timeout", type=float, default=60.0)
    suite_server.add_arguments(
        commands.add_parser("start", help="a throwaway server for examples with settings")
    )
    operator = commands.add_parser("operate", help="the suite's operator command (--operator-cmd)")
    operator.add_argument("--state", type=Path, required=True)
    operator.add_argument("--timeout", type=float, default=120.0)
    operator.add_argument("words", nargs=argparse.REMAINDER, help=suite_operator.USAGE)
    args = parser.parse_args(argv)
    if args.command == "restart":
        return restart(args.state, args.kind, args.timeout)
    if args.command == "operate":
        return suite_operator.operate(args.state, args.words, args.timeout, restart)
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    if args.command == "start":
        return suite_server.start(args.access_of, flags)
    return Supervisor(args.state, flags).run()
