"""Commit throughput: refimpl's embedded API against SQLite, side by side in one run.

Single-row parameterised INSERT commits with 1 and 16 writer threads: commits per second,
fsyncs per commit, p50/p99 commit latency. Then the same with a 2 ms delay added to every
fsync (a real SSD's flush), where group commit shows. SQLite runs with journal_mode=WAL,
synchronous=FULL, one writer.

    python tools/bench/commit.py [--commits 4000] [--delay-ms 2]

With `--against CHECKOUT`, the refimpl runs alone (no SQLite, no delay), this checkout's
and the other's in turn, `--rounds` times, each run in a child process: commits/s, commit
p50/p99, and the log's synced writes (`write_all_synced`, a flush's write and sync in one
call) timed one by one, p50/p99 in microseconds, what the disk's side of a commit costs;
medians over the rounds:

    python tools/bench/commit.py --against ../before [--rounds 6] [--threads 1,16]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import harness

import refimpl
from refimpl.engine.options import EngineOptions


def _timed_synced_writes() -> list[float]:
    """The log's synced writes from now on, each call's seconds added to the list returned."""
    from refimpl.engine.storage import wal

    samples: list[float] = []
    synced = wal.write_all_synced

    def timed(*args: Any) -> None:
        started = time.perf_counter()
        synced(*args)
        samples.append(time.perf_counter() - started)

    wal.write_all_synced = timed  # type: ignore[assignment]
    return samples


def child(commits: int, threads: int) -> None:
    """One run of this process's refimpl, its figures as JSON on the last line."""
    syncs = _timed_synced_writes()
    figures = run_refimpl(commits, threads, 0.0)
    figures["sync_p50_us"] = harness.percentile(syncs, 0.5) * 1e6
    figures["sync_p99_us"] = harness.percentile(syncs, 0.99) * 1e6
    print(json.dumps(figures))


def against(other: Path, rounds: int, commits: int, threads: list[int]) -> None:
    codes = [harness.REPO, other]
    keys = ("rate", "p50_ms", "p99_ms", "sync_p50_us", "sync_p99_us")
    rows = []
    for count in threads:
        arguments = ["--commits", str(commits), "--threads", str(count)]
        results = harness.alternate_children(__file__, codes, rounds, arguments)
        for k in range(rounds):
            runs = [results[code][k] for code in codes]
            print(
                f"{count} writer(s), round {k + 1}: commits/s "
                + " / ".join(f"{run['rate']:,.0f}" for run in runs)
                + ", sync p50 us "
                + " / ".join(f"{run['sync_p50_us']:,.0f}" for run in runs)
            )
        for code in codes:
            medians = [statistics.median(run[key] for run in results[code]) for key in keys]
            rows.append((f"{count} writer(s), {code}", *medians))
    harness.print_table(
        ("workload", "commits/s", "p50 ms", "p99 ms", "sync p50 us", "sync p99 us"), rows
    )


def run_refimpl(commits: int, threads: int, fsync_delay: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        options = EngineOptions(fsync_delay=fsync_delay)
        connection = refimpl.connect(Path(folder), options=options)
        connection.execute("CREATE TABLE bench (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
        log = connection.instance.database("demo").log
        per_thread = commits // threads
        latencies: list[list[float]] = [[] for _ in range(threads)]
        barrier = threading.Barrier(threads + 1)

        def writer(index: int) -> None:
            session = connection.session()
            samples = latencies[index]
            barrier.wait()
            base = index * per_thread
            for i in range(per_thread):
                started = time.perf_counter()
                session.execute("INSERT INTO bench VALUES (?, ?, ?)", (base + i, 1.5, "x"))
                samples.append(time.perf_counter() - started)

        workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        fsyncs_before = log.fsync_count
        barrier.wait()
        started = time.perf_counter()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - started
        fsyncs = log.fsync_count - fsyncs_before
        connection.close()
    done = per_thread * threads
    flat = [s for samples in latencies for s in samples]
    return {
        "rate": done / elapsed,
        "fsyncs_per_commit": fsyncs / done,
        "p50_ms": harness.percentile(flat, 0.5) * 1000,
        "p99_ms": harness.percentile(flat, 0.99) * 1000,
    }


def run_sqlite(commits: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        db = sqlite3.connect(Path(folder) / "bench.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE bench (id INTEGER PRIMARY KEY, v REAL, s TEXT)")
        samples = []
        started = time.perf_counter()
        for i in range(commits):
            t0 = time.perf_counter()
            db.execute("INSERT INTO bench VALUES (?, ?, ?)", (i, 1.5, "x"))
            samples.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
        db.close()
    return {
        "rate": commits / elapsed,
        "fsyncs_per_commit": float("nan"),
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": harness.percentile(samples, 0.99) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=4000)
    parser.add_argument("--delay-ms", type=float, default=2.0)
    parser.add_argument("--against", type=Path, help="another checkout, run in turn")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", default="1,16", help="writer threads of each phase")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    threads = [int(count) for count in args.threads.split(",")]
    if args.child:
        child(args.commits, threads[0])
        return
    if args.against is not None:
        against(args.against.resolve(), args.rounds, args.commits, threads)
        return

    rows = []
    sqlite = run_sqlite(args.commits)
    rows.append(("sqlite3 WAL FULL, 1 writer", sqlite))
    one = run_refimpl(args.commits, 1, 0.0)
    rows.append(("refimpl, 1 writer", one))
    sixteen = run_refimpl(args.commits, 16, 0.0)
    rows.append(("refimpl, 16 writers", sixteen))
    delay = args.delay_ms / 1000
    slow_commits = max(400, args.commits // 4)
    slow_one = run_refimpl(slow_commits // 4, 1, delay)
    rows.append((f"refimpl, 1 writer, +{args.delay_ms:g} ms fsync", slow_one))
    slow_sixteen = run_refimpl(slow_commits, 16, delay)
    rows.append((f"refimpl, 16 writers, +{args.delay_ms:g} ms fsync", slow_sixteen))

    harness.print_table(
        ("workload", "commits/s", "fsync/commit", "p50 ms", "p99 ms"),
        [(name, f["rate"], f["fsyncs_per_commit"], f["p50_ms"], f["p99_ms"]) for name, f in rows],
    )
    against_sqlite = sixteen["rate"] / sqlite["rate"]
    per_fsync = 1 / slow_sixteen["fsyncs_per_commit"]
    group_gain = slow_sixteen["rate"] / slow_one["rate"]
    harness.print_checks(
        [
            harness.Check(
                "16 writers / sqlite 1 writer", against_sqlite, ">= 0.5x", against_sqlite >= 0.5
            ),
            harness.Check("1 writer / sqlite 1 writer", one["rate"] / sqlite["rate"]),
            harness.Check(
                f"with +{args.delay_ms:g} ms fsync: commits per fsync (16 writers)",
                per_fsync,
                "> 8",
                per_fsync > 8,
            ),
            harness.Check(
                f"with +{args.delay_ms:g} ms fsync: 16 writers / 1 writer",
                group_gain,
                "> 6x",
                group_gain > 6,
            ),
        ]
    )


if __name__ == "__main__":
    main()
