"""Per-request cost at 16 clients, refimpl and PostgreSQL 15 alternately in one run (issue 37).

Four workloads, each a phase of `pgwire.py` or `http.py` with 16 clients:

- `pg-select`: prepared point SELECT over the PostgreSQL protocol (psycopg, parameters);
- `pg-insert`: prepared one-row INSERT over the protocol, each its own commit;
- `exec-select`: `POST /exec` point SELECT (the peer: psycopg sending the same SQL text);
- `exec-insert`: `POST /exec` one-row INSERT (the same).

One `refimpl serve --pg-port 0` process and one throwaway PostgreSQL (fsync and
synchronous_commit on) stay up for the whole run; each round runs every workload against
both, one after the other, the order swapped every round so that neither always runs
second. With `--before CHECKOUT`, a server of that checkout (another revision of this
repository) runs each workload too, between the two: the figures of two trees side by side.

Each phase prints its rate, the server's CPU per request (refimpl: utime+stime of its
process over the measured seconds; PostgreSQL: every process of the cluster, the backends'
time reaped by the postmaster included, over the whole phase with its warm-up and
connections, so a little high) and the load average at its start; for refimpl also its
threads' context switches per request (each a thread that slept on a lock, a condition or
the kernel and was woken, or was preempted), its log flushes per request (fsyncs, from
/metrics: how many commits a group commit covers), the user-time share of its CPU and the
time its threads waited, runnable, for a CPU per request (`run_delay`: a round the machine's
load starved, not one the server was slow in); with
`--threads`, also each thread group's runs and CPU per request (`server_sampling.thread_cpu`,
named by py-spy): which thread wakes how often for a request. The end prints the medians of
the rounds and the ratios against the targets.

    python tools/bench/per_request.py --rounds 3 --seconds 4
    python tools/bench/per_request.py --workloads pg-insert --before ../before-tree
    python tools/bench/per_request.py --workloads pg-insert,exec-insert --no-postgres \
        --before ../before-tree --threads
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import harness
import pgwire
import server_sampling

bench_http = harness.bench_http()  # this folder's http.py

# The workload, and its target as a share of PostgreSQL's rate (issue 37).
TARGETS: dict[str, float | None] = {
    "pg-select": 0.6,
    "pg-insert": 0.8,
    "exec-select": 0.5,
    "exec-insert": 0.5,
}
CLIENTS = 16


def _ticks(pid: int, children: bool) -> int:
    """utime+stime of a process (and, with `children`, of its reaped children) in ticks."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0  # a backend that left meanwhile: its time is in the postmaster's cutime
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks


def cluster_cpu(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL cluster: the postmaster, its live children, and the
    children it has reaped."""
    total = _ticks(postmaster, True)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1]
            except OSError:
                continue
            if int(parent) == postmaster:
                total += _ticks(int(entry), False)
    return total / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> int:
    """Context switches of every thread of a process so far (voluntary and not): each a
    thread that slept on a lock, a condition or the kernel, or was preempted."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        for line in status.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


def run_delay(pid: int) -> float:
    """Seconds the threads of a process have waited, runnable, for a CPU so far (schedstat;
    counted as each thread gets one). On a machine others load, a round whose rate fell with
    its CPU per request unchanged shows it here: its worker holding the admission place was
    runnable and preempted (each send wakes a client that may take its CPU), and every
    request waited for it, not for the server's work."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[1])
        except OSError:
            continue  # a thread that ended meanwhile
    return total / 1e9


def user_system(pid: int) -> tuple[float, float]:
    """utime and stime of a process in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def fsyncs(target: dict[str, Any]) -> float:
    """The fsyncs a refimpl server's logs have made so far (every database's, folders'
    included), read from its /metrics; 0 when it cannot be read."""
    import urllib.request  # here: at the top, this folder's http.py would shadow its http

    request = urllib.request.Request(
        target["url"] + "/metrics", headers={"Authorization": f"Bearer {target['token']}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kdb_fsync_duration_seconds_count")
    )


class System:
    """One side of the comparison: how to run a workload's phase against it."""

    def __init__(self, name: str, pg_conninfo: str, exec_target: dict[str, Any]) -> None:
        self.name = name
        self.pg_conninfo = pg_conninfo
        self.exec_target = exec_target
        self.pid: int | None = exec_target.get("pid")
        self.postmaster: int | None = None

    def run(
        self, workload: str, seconds: float, id_base: int, by_thread: bool = False
    ) -> dict[str, float]:
        """The phase's figures; with `by_thread` (a refimpl server), also `runs <group>` and
        `cpu <group>`: each thread group's runs and CPU seconds per request."""
        kind, op = workload.split("-", 1)  # pg-simple-select: pgwire's op simple-select
        before = cluster_cpu(self.postmaster) if self.postmaster else 0.0
        by_thread = by_thread and bool(self.pid)
        if self.pid:
            began_fsyncs = fsyncs(self.exec_target)
            if by_thread:
                # Before the counts begin: py-spy's look stops and resumes every thread.
                names = server_sampling.thread_names(self.pid)
                began_threads = server_sampling.thread_cpu(self.pid)
            began_switches, began_times = switches(self.pid), user_system(self.pid)
            began_delay = run_delay(self.pid)
        if kind == "pg":
            figures = pgwire.run_phase(self.pg_conninfo, op, CLIENTS, 4, seconds, id_base, self.pid)
        else:
            target = self.exec_target if self.pid else self.pg_target()
            figures = bench_http.run_phase(target, op, CLIENTS, 4, seconds, id_base)
        if self.pid:
            # Over the whole phase (warm-up included), per request of the measured part's
            # rate: the server's wake-ups and its split of user and kernel time.
            requests = figures["rate"] * (seconds + harness.CLIENT_WARMUP)
            ended = user_system(self.pid)
            figures["switches"] = (switches(self.pid) - began_switches) / requests
            figures["cpu_wait"] = (run_delay(self.pid) - began_delay) / requests
            # Log flushes (group commits) a request: how many commits one flush covers.
            figures["flushes"] = (fsyncs(self.exec_target) - began_fsyncs) / requests
            figures["user_share"] = (ended[0] - began_times[0]) / max(
                1e-9, sum(ended) - sum(began_times)
            )
            if by_thread:
                ended_threads = server_sampling.thread_cpu(self.pid)
                split = server_sampling.by_name(began_threads, ended_threads, names)
                for group, (cpu, runs) in split.items():
                    figures[f"runs {group}"] = runs / requests
                    figures[f"cpu {group}"] = cpu / requests
        if self.postmaster:
            time.sleep(0.3)  # the backends gone and reaped
            requests = figures["rate"] * (seconds + harness.CLIENT_WARMUP)
            figures["cpu_ms"] = 1000 * (cluster_cpu(self.postmaster) - before) / requests
        return figures

    def pg_target(self) -> dict[str, Any]:
        return {"kind": "pg", "conninfo": self.pg_conninfo}


def refimpl_system(name: str, server: harness.RefimplServer) -> System:
    conninfo = pgwire.prepare_refimpl(server)
    # pgwire.prepare_refimpl made the tables and rows that http.py's workloads read too.
    target = {
        "kind": "refimpl",
        "url": server.url,
        "token": server.token,
        "pid": server.pid,
        "client": "lean",
    }
    return System(name, conninfo, target)


def postgres_system(pg: harness.Postgres) -> System:
    system = System("postgres", pgwire.prepare_postgres(pg), {})
    system.postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
    return system


def main() -> None:
    compare(__doc__, TARGETS)


def compare(description: str | None, targets: dict[str, float | None]) -> None:
    """Run a bench of this script's kind from its command line: `targets`, the workloads it
    may run (all by default: `--workloads`) and each one's target as a share of
    PostgreSQL's rate (None: no target)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="measured time per phase")
    parser.add_argument("--workloads", default=",".join(targets))
    parser.add_argument("--before", type=Path, help="another checkout to run alternately")
    parser.add_argument("--no-postgres", action="store_true", help="no peer (with --before)")
    parser.add_argument(
        "--threads", action="store_true", help="runs and CPU per request by thread group"
    )
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    servers = [harness.RefimplServer(threads=16, extra=["--pg-port", "0"])]
    if args.before:
        servers.append(
            harness.RefimplServer(threads=16, extra=["--pg-port", "0"], code=args.before)
        )
    pg = None if args.no_postgres else harness.Postgres()
    figures: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        systems = []
        for name, server in zip(("refimpl", "before"), servers, strict=False):
            server.start()
            systems.append(refimpl_system(name, server))
        if pg is not None:
            pg.start()
            systems.append(postgres_system(pg))
        id_base = 0
        for number in range(args.rounds):
            order = systems if number % 2 == 0 else systems[::-1]
            for workload in workloads:
                for system in order:
                    load = os.getloadavg()[0]
                    id_base += 10**9
                    result = system.run(workload, args.seconds, id_base, args.threads)
                    result["load"] = load
                    figures.setdefault((workload, system.name), []).append(result)
                    print(
                        f"round {number + 1} {workload:12} {system.name:8}"
                        f" {result['rate']:8.0f}/s  CPU {1000 * result['cpu_ms']:6.0f} us/req"
                        f"  p50 {result['p50']:.2f} ms  errors {result['errors']}"
                        + (
                            f"  switches {result['switches']:.1f}/req"
                            f" flushes {result['flushes']:.2f}/req"
                            f" user {100 * result['user_share']:.0f}%"
                            f" waited for a CPU {1e6 * result['cpu_wait']:.0f} us/req"
                            if "switches" in result
                            else ""
                        )
                        + f"  load {load:.1f}",
                        flush=True,
                    )
                    for key in sorted(k for k in result if k.startswith("runs ")):
                        group = key.removeprefix("runs ")
                        if result[key] >= 0.01:
                            print(
                                f"    {group:24} runs {result[key]:5.2f}/req"
                                f"  CPU {1e6 * result['cpu ' + group]:5.0f} us/req"
                            )
    finally:
        for server in servers:
            server.stop()
        if pg is not None:
            pg.stop()
    print()
    names = [s.name for s in systems]
    checks = []
    for workload in workloads:
        line = f"{workload:12}"
        for name in names:
            runs = figures[(workload, name)]
            rate = statistics.median(r["rate"] for r in runs)
            cpu = statistics.median(1000 * r["cpu_ms"] for r in runs)
            line += f"  {name} {rate:7.0f}/s {cpu:5.0f} us"
            if name == "refimpl":
                checks.append(harness.Check(f"{workload}: refimpl server CPU us/request", cpu))
        if "postgres" in names:
            ours, theirs = figures[(workload, "refimpl")], figures[(workload, "postgres")]
            ratios = [a["rate"] / b["rate"] for a, b in zip(ours, theirs, strict=True)]
            median = statistics.median(ratios)
            target = targets[workload]
            met = "" if target is None else "met" if median >= target else "not met"
            failed = any(r["errors"] for r in ours + theirs)
            if failed:
                # Failed requests are fast: a phase with errors measures them, not the work.
                met = "not shown (requests failed)"
            shown = " ".join(f"{r:.2f}" for r in ratios)
            line += f"  ratio {median:.2f} [{shown}]"
            line += "" if target is None else f" target {target}"
            line += f" {met}" if met else ""
            if not failed:
                checks.append(
                    harness.Check(
                        f"{workload}: req/s / PostgreSQL's at {CLIENTS} clients"
                        f" ({len(ratios)} rounds)",
                        median,
                        "" if target is None else f">= {target}x",
                        target is not None and median >= target,
                        statistics.median(r["rate"] for r in ours),
                        statistics.median(r["rate"] for r in theirs),
                    )
                )
        loads = [r["load"] for runs in figures.values() for r in runs]
        print(line + f"  (load {min(loads):.1f}-{max(loads):.1f})")
    print()
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
