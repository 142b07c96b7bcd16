"""The processes a bench measures or runs: a process's CPU and RSS, the server pinned apart
from its clients, a phase of forked clients (`run_client_phase`), and a script's children
under each checkout in turn (`alternate_children`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.figures import summary
from harness.places import BENCH

if TYPE_CHECKING:
    from harness.server import RefimplServer


def rss_mb() -> tuple[float, float]:
    """This process's RSS in MB: current (/proc/self/statm) and peak (resource.getrusage
    ru_maxrss; Linux starts it anew at `reset_peak_rss`)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        current = pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        current = float("nan")
    return current, peak


def reset_peak_rss() -> None:
    """Start the peak RSS (VmHWM, ru_maxrss) anew at the current RSS: 5 to clear_refs."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


CLIENT_WARMUP = 0.5  # seconds of a phase's start that its clients do not count
CLIENT_GRACE = 120.0  # a phase's clients must be done this long after its end


def pin_apart(server: RefimplServer) -> None:
    """Every thread of `server` onto the first CPU, this process (and so every process it
    forks from now on) onto the others: a client's wait is then the server's delay, not the
    time the server kept the client off its core. Threads the server starts later inherit
    their creator's CPU. `unpin()` gives this process every CPU again."""
    assert server.process is not None
    pid = server.process.pid
    for thread in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(thread), {0})
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))


def unpin() -> None:
    """This process on every CPU again (after `pin_apart`)."""
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


def run_client_phase(
    process: Callable[..., tuple[list[float], int]],
    target: Any,
    op: str,
    clients: int,
    procs: int,
    seconds: float,
    id_base: int,
    pid: int | None = None,
) -> dict[str, float]:
    """One phase of `clients` clients in at most `procs` forked processes, each running
    `process(target, op, its clients, id_base, start_at, stop_at)`, which returns its
    latencies in seconds (those that began after the warm-up) and its error count.

    The figures are `summary`'s in milliseconds, plus `rate` (per second), `errors` and, with
    `pid`, `cpu_ms`: that process's CPU (utime+stime) over the measured seconds per request.
    """
    groups = [list(range(p, clients, procs)) for p in range(min(procs, clients))]
    pool = multiprocessing.get_context("fork").Pool(len(groups))
    cpu = float("nan")
    try:
        start_at = time.monotonic() + 1.0  # every process started and connected
        stop_at = start_at + CLIENT_WARMUP + seconds
        pending = pool.starmap_async(
            process, [(target, op, g, id_base, start_at, stop_at) for g in groups]
        )
        if pid is not None:
            time.sleep(max(0.0, start_at + CLIENT_WARMUP - time.monotonic()))
            cpu = cpu_seconds(pid)
            time.sleep(max(0.0, stop_at - time.monotonic()))
            cpu = cpu_seconds(pid) - cpu
        results = pending.get(timeout=seconds + CLIENT_GRACE)
    except BaseException:
        # A client process that died (or a stop) leaves its task pending: join() would
        # wait for it forever.
        pool.terminate()
        raise
    # close() and join(), not terminate(): terminating a pool whose workers are idle can
    # hang on their task queue's lock.
    pool.close()
    pool.join()
    samples = [s for r, _ in results for s in r]
    figures = summary([s * 1000 for s in samples])
    figures["rate"] = len(samples) / seconds
    figures["errors"] = sum(e for _, e in results)
    figures["cpu_ms"] = cpu / len(samples) * 1000 if samples else float("nan")
    return figures


def alternate_children(
    script: str, codes: Sequence[Path], runs: int, arguments: Sequence[str]
) -> dict[Path, list[dict[str, Any]]]:
    """Run `script --child *arguments` `runs` times under each checkout in turn (its refimpl
    first on the path, then this folder); each child prints its figures as JSON on its last
    line. A child that fails ends the bench with its error output."""
    results: dict[Path, list[dict[str, Any]]] = {code: [] for code in codes}
    for _ in range(runs):
        for code in codes:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), str(BENCH)]))
            done = subprocess.run(
                [sys.executable, script, "--child", *arguments],
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if done.returncode != 0:
                raise SystemExit(f"{code}: {done.stderr[-2000:]}")
            results[code].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results
