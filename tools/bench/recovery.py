"""Recovery time: reopening a database whose log holds N single-row commits.

Writes N commits of one row each (`INSERT INTO r VALUES (id, v, s)`; each its own transaction
and its own log record) in a child process that then exits without closing anything, as a
killed server does once its commits were durable. Each checkout timed writes its own log
(with `--against OLD`, OLD's child writes OLD's): a log one version leaves need not open
cleanly in another (the zeros a log now writes ahead of its end are a torn tail to a
version before them). Background checkpoints are off while it
writes, so the 55 MB of log of 1,000,000 such commits is what a server leaves whose
`checkpoint_mb` is 64 or more (with the default, 8, a crash leaves at most about 132,000
of them to replay: `--commits 132000` times that; 275,000 with the 16 of before). Then it
times reopening the data folder in three states:

1. after a crash (the folder as the child left it): recovery replays all N records;
2. after a clean stop (the folder opened once and closed): a close writes a checkpoint when
   the log holds 1 MB or more since the latest one, so recovery loads it and replays
   nothing; a checkout without that checkpoint replays all N records here too;
3. with a recent checkpoint (CHECKPOINT, then --tail more commits and a clean stop):
   recovery loads the checkpoint and replays only the tail. Each checkout writes its own
   checkpoint and tail (checkpoint files of one version need not load in an older one).

The whole log, kept for change-stream readers, is checked at every open by its segments'
seals (one CRC32 each) and what follows them frame by frame.

    python tools/bench/recovery.py [--commits 1000000] [--tail 1000] [--repeat 3] [--keep DIR]
    python tools/bench/recovery.py --quick            # cases 2 and 3 only
    python tools/bench/recovery.py --against OLD      # each reopen also by another checkout
    python tools/bench/recovery.py --profile DATA     # cProfile of one open of a data folder
    python tools/bench/recovery.py --checkpoint-cost DATA  # a writer's commits around one

`--checkpoint-cost DATA` (on a copy of the folder, which it changes) opens it, then a writer
commits single rows, each waiting for its fsync as a server's do, while one CHECKPOINT
runs in a background thread as `checkpoint_mb` starts one: it prints the checkpoint's wall
and CPU seconds and the writer's commit latency (p50, p99, max) and rate during it and
outside it. A checkpoint holds the write lock only to take the tables' blocks; its writing
competes with the writer for the interpreter lock, which is what the latency shows.

Every reopen runs in a fresh process (`--reopen-once`) on a fresh copy of the folder, so a
close's checkpoint never changes what the next one opens; it is timed in wall-clock seconds
and in that process's CPU seconds (the figure that other work on a shared machine changes
least). With `--against OLD` (a checkout of another version, such as one made by `git
worktree add`), each case is timed alternately by this checkout and by OLD, each from the
state its own code leaves, and the medians are printed side by side.

The commits go through the engine's own commit path (write lock, transaction, log record,
install), so the log is exactly what N single-row INSERT statements would leave. Only their
durability wait is batched (one wait per --batch commits, fsync_delay 0), which changes how
long writing takes, not what the log holds. Background checkpoints are off while writing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness

import refimpl
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.progress import Progress
from refimpl.engine.statements import executor
from refimpl.engine.storage.transaction import Transaction

NEVER = 1 << 62
OPTIONS = EngineOptions(wal_archive_bytes=NEVER, checkpoint_bytes=NEVER, fsync_delay=0.0)
HERE = Path(__file__).resolve()
CHECKOUT = HERE.parents[2]  # a reopen's process finds refimpl where PYTHONPATH says


def write_commits(path: Path, start: int, count: int, batch: int, crash: bool = False) -> None:
    """Commit rows start .. start+count-1, one transaction (and log record) each; with
    `crash`, leave the process without closing once the last commit is durable."""
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
    if crash:
        sys.stdout.flush()
        os._exit(0)  # no close: no seal, no checkpoint, as a killed server leaves it
    connection.close()


def reopen_once(path: Path) -> dict[str, float]:
    """Time one open of the data folder `path`; its figures."""
    replayed: list[int] = []

    def heard(progress: Progress) -> None:
        if progress.done == progress.total:
            replayed.append(progress.total)

    started, cpu = time.perf_counter(), time.process_time()
    instance = Instance.open(path, OPTIONS, progress=heard)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = instance.database("demo").stats()
    assert instance.database("demo").recovery_messages == []
    instance.close()
    return {
        "wall": wall,
        "cpu": cpu,
        "rows": stats["rows"],
        "replayed": sum(replayed),
        "log_bytes": stats["log_bytes"],
    }


def _run(code: Path, *arguments: str) -> str:
    """This script run by the checkout `code` in a fresh process; its standard output. A
    failure stops the bench with that process's own error output."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, str(HERE), *arguments]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(arguments[:1])} by {code} failed:\n{done.stderr}")
    return done.stdout


def crashed(folder: Path, code: Path, commits: int, batch: int) -> Path:
    """`folder`'s data folder of `commits` commits written by the checkout `code`, left as a
    crash leaves it (kept from an earlier run when it is there: `--reuse`)."""
    target = folder / ("crashed" if code == CHECKOUT else f"crashed-{code.name}")
    if not target.exists():
        started = time.perf_counter()
        _run(code, "--crash-once", str(target), "--commits", str(commits), "--batch", str(batch))
        written = time.perf_counter() - started
        who = "this checkout" if code == CHECKOUT else str(code)
        print(f"  [{who}] written in {written:.1f} s ({commits / written:,.0f} commits/s)")
    return target


def copy_durably(source: Path, target: Path) -> None:
    """Copy a data folder and fsync every file of the copy: a reopen's check of its log
    then finds it on disk, as it finds a folder its server left, rather than waiting for
    the copy's 60 MB to be written back."""
    shutil.copytree(source, target)
    for file in target.rglob("*"):
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def tailed(source: Path, code: Path, commits: int, tail: int, batch: int) -> Path:
    """A copy of `source` (`commits` commits) where the checkout `code` wrote a CHECKPOINT,
    then `tail` more commits, and stopped cleanly."""
    copy = source.parent / f"tailed-{len(list(source.parent.glob('tailed-*')))}"
    copy_durably(source, copy)
    said = _run(
        code,
        "--tail-once",
        str(copy),
        "--commits",
        str(commits),
        "--tail",
        str(tail),
        "--batch",
        str(batch),
    )
    who = "this checkout" if code == CHECKOUT else str(code)
    print(f"  [{who}] {said.strip()}", flush=True)
    return copy


def tail_once(path: Path, commits: int, tail: int, batch: int) -> None:
    """CHECKPOINT of the data folder `path`, then `tail` more commits and a clean stop."""
    with refimpl.connect(path, options=OPTIONS) as connection:
        started = time.perf_counter()
        message = connection.execute("CHECKPOINT").message
        took = time.perf_counter() - started
    print(f"CHECKPOINT: {message} in {took:.2f} s")
    write_commits(path, commits, tail, batch)


def stopped(source: Path, code: Path) -> Path:
    """A copy of `source` opened and closed by the checkout `code`: what its clean stop
    leaves (a checkpoint, where its close writes one)."""
    copy = source.parent / f"stopped-{len(list(source.parent.glob('stopped-*')))}"
    copy_durably(source, copy)
    _run(code, "--stop-once", str(copy))
    return copy


def time_reopen(source: Path, code: Path, expected_rows: int) -> dict[str, float]:
    """One reopen by the checkout `code` in a fresh process, of a fresh copy of `source`."""
    scratch = Path(tempfile.mkdtemp(prefix="kdb-reopen-", dir=source.parent))
    try:
        copy = scratch / "data"
        copy_durably(source, copy)
        figures = json.loads(_run(code, "--reopen-once", str(copy)).strip().splitlines()[-1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert figures["rows"] == expected_rows, (figures["rows"], expected_rows)
    return figures


def measure(
    label: str, sources: dict[Path, Path], rows: int, repeat: int
) -> dict[Path, list[dict[str, float]]]:
    """`repeat` reopens by each checkout in turn, each of its own copy of its source
    (checkout -> folder); prints their medians."""
    codes = list(sources)
    runs: dict[Path, list[dict[str, float]]] = {code: [] for code in codes}
    for _ in range(repeat):
        for code in codes:
            runs[code].append(time_reopen(sources[code], code, rows))
    for code in codes:
        walls = [run["wall"] for run in runs[code]]
        cpus = [run["cpu"] for run in runs[code]]
        who = "this checkout" if code == CHECKOUT else str(code)
        print(
            f"{label} [{who}]: median {statistics.median(walls):.2f} s wall"
            f" (best {min(walls):.2f}), CPU {statistics.median(cpus):.2f} s;"
            f" {runs[code][-1]['replayed']:,.0f} records replayed,"
            f" log {runs[code][-1]['log_bytes'] / 1e6:.1f} MB; load {_load()}",
            flush=True,
        )
    return runs


def checkpoint_cost(path: Path, settle: float = 2.0) -> None:
    """Commit latency of one writer before, during and after a background checkpoint of
    the data folder `path` (changed: a copy)."""
    instance = Instance.open(path, OPTIONS)
    database = instance.database("demo")
    rows = database.stats()["rows"]
    commits: list[tuple[float, float]] = []  # (start, seconds) of each commit
    stop = threading.Event()

    def writer() -> None:
        i = 1 << 40  # ids after any the folder holds
        while not stop.is_set():
            started = time.perf_counter()
            database.acquire_write()
            try:
                txn = Transaction(database.tables)
                work = txn.table("r")
                executor.insert_values(work, work.schema, ["id", "v", "s"], [(i, 0.5, "row")])
                lsn = database.commit_locked(txn)
            finally:
                database.release_write()
            assert lsn is not None
            database.wait_durable(lsn)
            commits.append((started, time.perf_counter() - started))
            i += 1

    took: dict[str, float] = {}

    def checkpointer() -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        database.checkpoint()
        took["cpu"] = time.thread_time() - cpu
        took["start"], took["end"] = started, time.perf_counter()

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(settle)
    background = threading.Thread(target=checkpointer)
    background.start()
    background.join()
    time.sleep(settle)
    stop.set()
    thread.join()
    instance.close()
    start, end = took["start"], took["end"]
    during = [s for at, s in commits if start <= at < end]
    outside = [s for at, s in commits if not start - 0.1 <= at < end + 0.1]
    span = end - start
    print(
        f"checkpoint of {rows:,} rows: {span:.2f} s wall, {took['cpu']:.2f} s CPU"
        f" (its thread); load {_load()}"
    )
    rows_out = []
    for label, samples, seconds in (
        ("during the checkpoint", during, span),
        ("outside it", outside, 2 * settle - 0.2),
    ):
        figures = harness.summary([1000 * x for x in samples])
        rate = len(samples) / seconds
        rows_out.append([label, figures["n"], rate, figures["p50"], figures["p99"], figures["max"]])
    harness.print_table(["writer's commits", "n", "per s", "p50 ms", "p99 ms", "max ms"], rows_out)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--tail", type=int, default=1000, help="commits after the checkpoint")
    parser.add_argument("--repeat", type=int, default=3, help="reopens timed per case")
    parser.add_argument("--batch", type=int, default=1000, help="commits per durability wait")
    parser.add_argument("--keep", type=Path, help="write into DIR and keep it")
    parser.add_argument(
        "--reuse", action="store_true", help="time the folders a run with --keep DIR left there"
    )
    parser.add_argument("--quick", action="store_true", help="leave out the reopen after a crash")
    parser.add_argument("--against", type=Path, help="another checkout timed alternately")
    parser.add_argument(
        "--profile",
        type=Path,
        help="print a cProfile of one open of this data folder (it opens it)",
    )
    parser.add_argument(
        "--checkpoint-cost",
        type=Path,
        help="a writer's commit latency around a background checkpoint of this data folder"
        " (it changes the folder: give it a copy)",
    )
    parser.add_argument("--reopen-once", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stop-once", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tail-once", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--crash-once", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reopen_once is not None:
        print(json.dumps(reopen_once(args.reopen_once)))
        return
    if args.profile is not None:
        # Imported here, not above: pstats imports `copy` before `harness` has put the
        # standard library's ahead of this folder's copy.py.
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        instance = Instance.open(args.profile, OPTIONS)
        profile.disable()
        instance.close()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        return
    if args.checkpoint_cost is not None:
        checkpoint_cost(args.checkpoint_cost)
        return
    if args.stop_once is not None:
        Instance.open(args.stop_once, OPTIONS).close()
        return
    if args.tail_once is not None:
        tail_once(args.tail_once, args.commits, args.tail, args.batch)
        return
    if args.crash_once is not None:
        write_commits(args.crash_once, 0, args.commits, args.batch, crash=True)
        return

    codes = [CHECKOUT] + ([args.against.resolve()] if args.against else [])
    folder = args.keep or Path(tempfile.mkdtemp(prefix="kdb-recovery-"))
    checks = []
    try:
        if not args.reuse:
            for old in folder.glob("crashed*"):
                shutil.rmtree(old)
        print(f"writing {args.commits:,} single-row commits; load {_load()}", flush=True)
        crashes = {code: crashed(folder, code, args.commits, args.batch) for code in codes}
        for old in [*folder.glob("stopped-*"), *folder.glob("tailed-*")]:
            shutil.rmtree(old)

        if not args.quick:
            measure("reopen after a crash", crashes, args.commits, args.repeat)
        sources = {code: stopped(crashes[code], code) for code in codes}
        stops = measure("reopen after a clean stop", sources, args.commits, args.repeat)

        sources = {
            code: tailed(crashes[code], code, args.commits, args.tail, args.batch) for code in codes
        }
        total = args.commits + args.tail
        label = f"reopen with a checkpoint {args.tail:,} commits before the end"
        tail = measure(label, sources, total, args.repeat)
        for label, runs in (("a clean stop", stops), ("a recent checkpoint", tail)):
            wall = statistics.median(run["wall"] for run in runs[CHECKOUT])
            checks.append(
                harness.Check(
                    f"reopen after {args.commits:,} commits and {label} (s)",
                    wall,
                    "< 0.5 s",  # issue 37
                    wall < 0.5,
                )
            )
        harness.print_checks(checks)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
