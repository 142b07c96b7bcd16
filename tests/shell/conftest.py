"""What the shell's tests share: a shell typed into through a pseudo-terminal (pexpect), and
one `refimpl serve` for a test file."""

from __future__ import annotations

import os
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.http.conftest import ROOT, Server, running_server

TIMEOUT = 60  # a loaded machine may take long to start a shell


def shell_environment(home: Path) -> dict[str, str]:
    """The environment a shell runs in: no server setting (`KDB_*`), its own home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KDB_", "REFIMPL_"))}
    env.update(
        HOME=str(home),
        PYTHONPATH=str(ROOT),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm",
        COLUMNS="200",
        LINES="50",
    )
    return env


def spawn(tmp_path: Path, *args: str, prompt: str = "demo=>", **env: str) -> pexpect.spawn:
    """`refimpl sql ARGS` in a terminal of 50 lines by 200 columns, once it shows `prompt`."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "refimpl", "sql", *args],
        env={**shell_environment(tmp_path), **env},
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 200),
    )
    child.expect(prompt)  # the prompt (then cursor moves)
    return child


def type_line(child: pexpect.spawn, line: str) -> None:
    child.send(line + "\r")


def wait_until_running(child: pexpect.spawn) -> None:
    """Return once the shell took the line typed last and runs it: its terminal turns
    signals on again (a Ctrl-C is then SIGINT, not a key the prompt reads later), however
    long a busy machine takes to get there."""
    deadline = time.monotonic() + TIMEOUT
    while not termios.tcgetattr(child.child_fd)[3] & termios.ISIG:
        assert time.monotonic() < deadline, "the shell did not take the line"
        time.sleep(0.01)


def quit_shell(child: pexpect.spawn) -> None:
    type_line(child, "\\q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("shell-server") / "data") as running:
        yield running
