"""Recovery time: reopening a database whose log holds N single-row commits.

Writes N commits of one row each (`INSERT INTO r VALUES (id, v, s)`; each its own transaction
and its own log record) and then times reopening the data folder:

1. without a checkpoint: recovery replays all N records;
2. with a recent checkpoint (CHECKPOINT, then --tail more commits): recovery loads the
   checkpoint and replays only the tail; the whole log, kept for change-stream readers, is
   checked by its segments' seals (one CRC32 each) rather than frame by frame.

    python tools/bench/recovery.py [--commits 1000000] [--tail 1000] [--repeat 3] [--keep DIR]
    python tools/bench/recovery.py --quick    # case 2 only, at 1,000,000 commits

Each reopen is timed in wall-clock seconds and in this process's CPU seconds (the figure
that other work on a shared machine changes least).

The commits go through the engine's own commit path (write lock, transaction, log record,
install), so the log is exactly what N single-row INSERT statements would leave. Only their
durability wait is batched (one wait per --batch commits, fsync_delay 0), which changes how
long writing takes, not what the log holds. Background checkpoints are off while writing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import harness

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.statements import executor
from refimpl.engine.storage.transaction import Transaction

NEVER = 1 << 62
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER, fsync_delay=0.0)


def write_commits(path: Path, start: int, count: int, batch: int) -> None:
    """Commit rows start .. start+count-1, one transaction (and log record) each."""
    connection = refimpl.connect(path, options=OPTIONS)
    database = connection.instance.database("demo")
    connection.execute("CREATE TABLE IF NOT EXISTS r (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    columns = ["id", "v", "s"]
    lsn = None
    started = time.perf_counter()
    for i in range(start, start + count):
        database.acquire_write()
        try:
            txn = Transaction(database.tables)
            work = txn.table("r")
            executor.insert_values(work, work.schema, columns, [(i, i * 0.5, "row")])
            lsn = database.commit_locked(txn)
        finally:
            database.release_write()
        if lsn is not None and (i - start + 1) % batch == 0:
            database.log.wait_durable(lsn)
        if (i - start + 1) % 100_000 == 0:
            rate = (i - start + 1) / (time.perf_counter() - started)
            print(f"  {i - start + 1:>10,} commits written ({rate:,.0f}/s)", flush=True)
    if lsn is not None:
        database.log.wait_durable(lsn)
    connection.close()


def time_reopen(path: Path, repeat: int, expected_rows: int) -> tuple[float, float, dict]:
    """(best wall, best CPU) seconds to reopen, and the database's stats after the last."""
    walls, cpus = [], []
    stats: dict = {}
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        connection = refimpl.connect(path, options=OPTIONS)
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        stats = connection.instance.database("demo").stats()
        assert stats["rows"] == expected_rows, (stats["rows"], expected_rows)
        assert connection.instance.recovery_messages == []
        connection.close()
    return min(walls), min(cpus), stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--tail", type=int, default=1000, help="commits after the checkpoint")
    parser.add_argument("--repeat", type=int, default=3, help="reopens timed per case")
    parser.add_argument("--batch", type=int, default=1000, help="commits per durability wait")
    parser.add_argument("--keep", type=Path, help="write into DIR and keep it")
    parser.add_argument(
        "--quick", action="store_true", help="only the reopen with a recent checkpoint (case 2)"
    )
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="kdb-recovery-"))
    path = folder / "data"
    checks = []
    try:
        print(f"writing {args.commits:,} single-row commits to {path}", flush=True)
        started = time.perf_counter()
        write_commits(path, 0, args.commits, args.batch)
        written = time.perf_counter() - started
        print(f"  written in {written:.1f} s ({args.commits / written:,.0f} commits/s)")

        if not args.quick:
            best, cpu, stats = time_reopen(path, args.repeat, args.commits)
            print(
                f"reopen without checkpoint: best {best:.2f} s (CPU {cpu:.2f} s;"
                f" {args.commits:,} records replayed, log {stats['log_bytes'] / 1e6:.1f} MB in"
                f" {stats['log_segments']} segment(s), {args.commits / best:,.0f} records/s)"
            )

        with refimpl.connect(path, options=OPTIONS) as connection:
            started = time.perf_counter()
            message = connection.execute("CHECKPOINT").message
            took = time.perf_counter() - started
        print(f"CHECKPOINT: {message} in {took:.2f} s")
        write_commits(path, args.commits, args.tail, args.batch)
        total = args.commits + args.tail
        best_c, cpu_c, stats = time_reopen(path, args.repeat, total)
        print(
            f"reopen with a recent checkpoint: best {best_c:.2f} s (CPU {cpu_c:.2f} s;"
            f" checkpoint at LSN {stats['checkpoint_lsn']}, {args.tail:,} records replayed,"
            f" log {stats['log_bytes'] / 1e6:.1f} MB in {stats['log_segments']} segment(s))"
        )
        checks.append(
            harness.Check(
                f"reopen after {total:,} commits, checkpoint {args.tail:,} before the end (s)",
                best_c,
                "< 0.5 s",  # issue 37
                best_c < 0.5,
            )
        )
        if not args.quick:
            checks.append(harness.Check("speed-up from the checkpoint (x)", best / best_c))
        harness.print_checks(checks)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
