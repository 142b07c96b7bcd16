"""Commit throughput: refimpl's embedded API against SQLite, side by side in one run.

Single-row parameterised INSERT commits with 1 and 16 writer threads: commits per second,
fsyncs per commit, p50/p99 commit latency. Then the same with a 2 ms delay added to every
fsync (a real SSD's flush), where group commit shows. SQLite runs with journal_mode=WAL,
synchronous=FULL, one writer.

    python tools/bench/commit.py [--commits 4000] [--delay-ms 2]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

import refimpl
from refimpl.engine.options import EngineOptions


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


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
        "p50_ms": percentile(flat, 0.5) * 1000,
        "p99_ms": percentile(flat, 0.99) * 1000,
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
        "p99_ms": percentile(samples, 0.99) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=4000)
    parser.add_argument("--delay-ms", type=float, default=2.0)
    args = parser.parse_args()

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

    print(f"{'workload':42} {'commits/s':>10} {'fsync/commit':>13} {'p50 ms':>8} {'p99 ms':>8}")
    for name, figures in rows:
        print(
            f"{name:42} {figures['rate']:10.0f} {figures['fsyncs_per_commit']:13.3f}"
            f" {figures['p50_ms']:8.3f} {figures['p99_ms']:8.3f}"
        )
    print()
    print(f"16 writers / sqlite 1 writer:            {sixteen['rate'] / sqlite['rate']:.2f}x"
          " (target >= 0.5x)")
    print(f"1 writer / sqlite 1 writer:              {one['rate'] / sqlite['rate']:.2f}x")
    per_fsync = 1 / slow_sixteen["fsyncs_per_commit"]
    print(f"with +{args.delay_ms:g} ms fsync: commits per fsync (16):  {per_fsync:.1f}"
          " (target > 8)")
    print(f"with +{args.delay_ms:g} ms fsync: 16 writers / 1 writer:  "
          f"{slow_sixteen['rate'] / slow_one['rate']:.1f}x (target > 6x)")


if __name__ == "__main__":
    main()
