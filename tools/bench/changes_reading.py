"""One read's figures for `changes_read.py`, either side's: rows/s, the server's and the
client's CPU per row, and the time the server's threads waited, runnable, for a core."""

from __future__ import annotations

import time
from pathlib import Path

import harness
import msgspec


class Reading(msgspec.Struct):
    """One read: rows/s, the server's and the client's CPU per row in microseconds, and the
    time the server's threads spent runnable but waiting for a core (`runq_us`, per row):
    the load's share of the wall-clock figure, which the server's CPU does not show."""

    rate: float = 0.0
    server_us: float = 0.0
    client_us: float = 0.0
    runq_us: float = 0.0
    pid: int = 0
    began: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    server_runq: float = 0.0

    @classmethod
    def start(cls, pid: int) -> Reading:
        return cls(
            pid=pid,
            began=time.perf_counter(),
            server_cpu=harness.cpu_seconds(pid),
            client_cpu=time.process_time(),
            server_runq=runq_seconds(pid),
        )

    def end(self, rows: int) -> Reading:
        elapsed = time.perf_counter() - self.began
        server = harness.cpu_seconds(self.pid) - self.server_cpu
        client = time.process_time() - self.client_cpu
        runq = runq_seconds(self.pid) - self.server_runq
        per_row = 1e6 / max(rows, 1)
        return Reading(rows / elapsed, server * per_row, client * per_row, runq * per_row)


def runq_seconds(pid: int) -> float:
    """Seconds the threads of process `pid` have spent runnable, waiting for a core (the
    second field of each thread's /proc schedstat); a thread gone since is not counted."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9
