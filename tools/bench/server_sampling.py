"""What a bench learns of a served process's threads beside its wall clock: each thread's CPU
and runs (schedstat) and its Python name (py-spy), and the launchers a `harness.RefimplServer`
runs under to profile every thread, or to count the Python opcodes or machine instructions of
all of them over a measured part (`ServerCount`): the counts, unlike times, not moved by the
machine's load. `subscribe.py` and `per_request.py` use them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def thread_cpu(pid: int) -> dict[int, tuple[float, int]]:
    """(CPU seconds, times run) of each thread of a process, by its native id, from its
    schedstat (nanoseconds on the CPU, and how many times the system ran it: each a wake-up
    or a return after losing the CPU; on a shared machine each costs tens of microseconds,
    caches refilled, so the count says where CPU goes that no profile shows)."""
    out: dict[int, tuple[float, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, _, slices = (task / "schedstat").read_text().split()
        except OSError:
            continue  # ended meanwhile
        out[int(task.name)] = (int(ran) / 1e9, int(slices))
    return out


def thread_names(pid: int) -> dict[int, str]:
    """The Python names of a process's threads by native id, a pool's numbers dropped
    (kdb-http-12 and kdb-http-3 are kdb-http-), as py-spy's one look at them shows; empty
    without py-spy (Python does not give its names to the system's threads)."""
    try:
        dump = subprocess.run(
            ["py-spy", "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for found in re.finditer(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(.*?\): "(.*)"$', dump, re.M):
        names[int(found[1], 0)] = found[2].rstrip("0123456789")
    return names


def by_name(
    before: dict[int, tuple[float, int]],
    after: dict[int, tuple[float, int]],
    names: dict[int, str],
) -> dict[str, tuple[float, int]]:
    """The CPU seconds and runs of a process's threads between two `thread_cpu` looks,
    summed by their `thread_names` name ("other" when unnamed)."""
    out: dict[str, tuple[float, int]] = {}
    for tid, (spent, runs) in after.items():
        name = names.get(tid, "other")
        spent_before, runs_before = before.get(tid, (0.0, 0))
        total, times = out.get(name, (0.0, 0))
        out[name] = (total + spent - spent_before, times + runs - runs_before)
    return out


# Runs `refimpl serve` with every thread that starts (workers, the waiting room, the owner
# pool, the log's) under a cProfile.Profile of its own, merged into one file at the stop:
# where a commit's delivery goes, beyond the requests `harness.PROFILE_LAUNCHER` sees. The
# clock is each thread's CPU time: a wait for the interpreter lock is no function's cost.
ALL_THREADS_LAUNCHER = """
import cProfile, pstats, sys, threading, time
out = sys.argv[1]
profiles = []
run = threading.Thread.run
def profiled(self):
    profile = cProfile.Profile(time.thread_time)  # CPU: not the waits for the lock
    profiles.append(profile)
    profile.enable()
    try:
        run(self)
    finally:
        profile.disable()
threading.Thread.run = profiled
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    stats.dump_stats(out)
sys.exit(status)
"""


# Runs `refimpl serve` with every thread that starts tracing the Python opcodes it runs while
# counting is on (SIGUSR1 turns it on, and off again), by (thread group, file, function),
# written as JSON to the file named first at the stop. Unlike CPU time, the count does not
# depend on the machine's load, so two trees compare on a busy machine (a hundredfold slower
# while it counts: space the commits, --interval 1). C code and the kernel are not in it.
OPCODES_LAUNCHER = """
import collections, json, re, signal, sys, threading
from pathlib import Path
out = sys.argv[1]
counts = collections.Counter()
counting = threading.Event()
def toggle(signum, frame):
    counting.clear() if counting.is_set() else counting.set()
signal.signal(signal.SIGUSR1, toggle)
def trace(frame, event, arg):
    if not counting.is_set():
        return None
    frame.f_trace_opcodes = True
    frame.f_trace_lines = False
    group = re.sub(r"-\\d+$", "-", threading.current_thread().name)
    key = f"{group} {Path(frame.f_code.co_filename).name}:{frame.f_code.co_qualname}"
    def local(frame, event, arg):
        if event == "opcode" and counting.is_set():
            counts[key] += 1
        return local
    return local
threading.settrace(trace)
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    Path(out).write_text(json.dumps(counts))
sys.exit(status)
"""


# Runs `refimpl serve` under valgrind's callgrind (the same process: the server's pid is
# valgrind's), its instrumentation off until `callgrind_control -i on`: the machine
# instructions of every thread while the commits run, C and the interpreter included, the
# same run after run whatever the machine's load (the kernel's work is not in it). Valgrind
# runs one thread at a time, some fifty times slower: space the commits (--interval 1).
INSTRUCTIONS_LAUNCHER = """
import os, sys
os.execvp("valgrind", [
    "valgrind", "--tool=callgrind", "--instr-atstart=no", "--max-threads=2000",
    f"--callgrind-out-file={sys.argv[1]}", sys.executable, "-m", "refimpl", *sys.argv[2:],
])
"""


@dataclass
class ServerCount:
    """A server's count over a measured part: the Python opcodes its threads run, by thread
    and function (`OPCODES_LAUNCHER`), or with `instructions` the machine instructions of all
    of them (`INSTRUCTIONS_LAUNCHER`); `out` is the file the launcher writes."""

    instructions: bool
    out: Path

    @classmethod
    def make(cls, instructions: bool) -> ServerCount:
        prefix, name = (
            ("kdb-callgrind-", "callgrind.out")
            if instructions
            else ("kdb-opcodes-", "opcodes.json")
        )
        return cls(instructions, Path(tempfile.mkdtemp(prefix=prefix)) / name)

    @property
    def launcher(self) -> str:
        return INSTRUCTIONS_LAUNCHER if self.instructions else OPCODES_LAUNCHER

    def start(self, pid: int) -> None:
        if self.instructions:
            _callgrind(pid, "-i", "on")
        else:
            os.kill(pid, signal.SIGUSR1)  # counting on

    def stop(self, pid: int) -> None:
        if self.instructions:
            _callgrind(pid, "-i", "off")
            _callgrind(pid, "-d")  # the count so far, in a file of its own
        else:
            os.kill(pid, signal.SIGUSR1)  # counting off

    def figures(self, units: int, keep: Path | None = None) -> dict[str, float]:
        """The count a unit: "op <thread group> <file>:<function>" each, or "instructions"
        (its callgrind output copied to `keep`, if given, for callgrind_annotate); the
        launcher's files removed."""
        figures: dict[str, float] = {}
        if self.instructions:
            dumps = sorted(self.out.parent.glob(self.out.name + ".*"))
            text = dumps[0].read_text() if dumps else ""
            found = re.search(r"^totals: (\d+)", text, re.MULTILINE)
            assert found is not None, "callgrind dumped no totals"
            figures["instructions"] = int(found.group(1)) / units
            if keep is not None:
                shutil.copyfile(dumps[0], keep)
        else:
            for key, count in json.loads(self.out.read_text()).items():
                figures[f"op {key}"] = count / units
        shutil.rmtree(self.out.parent, ignore_errors=True)
        return figures


def _callgrind(pid: int, *what: str) -> None:
    """`callgrind_control` asked of the server `pid` (run under `INSTRUCTIONS_LAUNCHER`)."""
    subprocess.run(
        ["callgrind_control", *what, str(pid)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
