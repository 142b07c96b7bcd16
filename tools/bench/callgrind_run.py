"""Machine instructions of a bench's measured part, counted by valgrind's callgrind: the one
runner the benches share.

A bench runs itself again under callgrind (`total`), with the instrumentation off at the
start so that the imports and the setup run uncounted (and faster); the inner run switches it
on where the measured part begins (`instrument`). Two ways to say what counts:
- every thread from the switch on (`total(..., within_reduce=False)`): a served request's
  flusher and sender threads included;
- only calls made within `functools.reduce` (`within_reduce=True`, callgrind's
  `--toggle-collect`), the one C function the measured part is wrapped in (`counted`) and
  that nothing of the engine's paths calls: one thread's part alone, whatever the others do.

The count is the same run after run within a fraction of a percent, whatever the machine's
load, so two trees compare on a loaded machine.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def instrument(on: bool = True, *, spin: bool = False) -> None:
    """Switch callgrind's instrumentation of this process (started under `total`) on or off;
    back once valgrind has answered. Valgrind answers from a running thread: with `spin`,
    this one keeps running while it waits (needed when no other thread of the process runs;
    the spin is uncounted where only `counted`'s calls are), else it blocks in a wait."""
    asking = subprocess.Popen(
        ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
        stdout=subprocess.DEVNULL,
    )
    if spin:
        while asking.poll() is None:
            pass
    else:
        asking.wait()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A bench's `--instructions` (run itself under callgrind: `total`) and the hidden
    `--once` its inner run is given (one measured part, counted)."""
    parser.add_argument(
        "--instructions", action="store_true", help="count machine instructions (callgrind)"
    )
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # callgrind's


def counted(part: Callable[[], object]) -> None:
    """`part()` within `functools.reduce`: what `total(..., within_reduce=True)` counts."""
    functools.reduce(lambda _, __: part(), [None], None)


def total(
    script: str, arguments: list[str], *, within_reduce: bool = False, keep: str | None = None
) -> int:
    """The instructions callgrind counted in a run of `script` (a bench's path) with
    `arguments` (which make it switch the counting on): all threads' from the switch, or
    with `within_reduce` only those within `counted`. `keep`: a file that keeps callgrind's
    output (for `callgrind_annotate`). SystemExit, with the run's output, when it fails."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(keep) if keep else Path(folder) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        if within_reduce:
            command += ["--collect-atstart=no", "--toggle-collect=functools_reduce"]
        command += [f"--callgrind-out-file={out}", sys.executable, script, *arguments]
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
        if done.returncode != 0:
            raise SystemExit(f"the run under callgrind failed:\n{done.stdout}{done.stderr}")
        found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    assert found is not None, "callgrind wrote no totals"
    return int(found.group(1))
