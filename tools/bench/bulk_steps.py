"""What a bulk load makes others wait for, measured in CPU time: figures a busy machine leaves
alone, unlike the round trips of `bulk_load.py`.

In one process per checkout (each run on its own code, --code as in `bulk_load.py`), the rows
of a --rows-row /imp (the same as `bulk_load.py` sends) are loaded by `Database.load_rows`,
the collector set as the server sets it. Printed for each checkout, in thread CPU time, so
that other processes on the machine do not count:

- the longest single C call of the load that runs no Python code: no other thread gets the
  interpreter lock while it runs, so every writer and reader of the server waits it out;
- with --steps, the longest step between two Python lines of the load (`_Steps`): also a
  type's call (`frozenset(a_list)`), which raises no C call event, and the freeing of a
  function's locals at its return, and of the load's rows after it (as /imp lets go of
  them);
- the longest pass of the collector during the load (it, too, stops every thread);
- the load's commit, which holds the write lock (other writers wait) and, for its install,
  the state lock (readers wait);
- the whole load's CPU time (profiled: the profile's cost included);
- another writer's commits meanwhile (a single-row INSERT every 10 ms from another thread of
  the process, while the load runs): their wall-clock p99 and max, what a server's other
  writers would wait (the machine's load changes these; the load average is printed).

A C call known to let the interpreter lock go while it runs (zlib's crc32 of a big buffer)
is left out of the longest calls.

With --parts day the table is partitioned by day alone, so that all the load's rows fall in
one partition (`rev.TRADES` partitions by symbol too: a hundredth of them in each).

    python tools/bench/bulk_steps.py --code ../old --code .
    python tools/bench/bulk_steps.py --parts day --over 0.5
    python tools/bench/bulk_steps.py --steps --runs 1
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import os
import sys
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path
from types import FrameType
from typing import Any

import harness
from rev import TRADES


def _rows(count: int) -> list[tuple[Any, ...]]:
    """The typed rows of `rev._importer`'s CSV: 100 symbols, 10 ms apart."""
    base = datetime.datetime(2026, 1, 5, tzinfo=datetime.UTC)
    start = int(base.timestamp()) * 1_000_000
    return [
        (start + i * 10_000, f"S{i % 100:03d}", round(100 + i % 997 * 0.1, 1), i % 50 + 1)
        for i in range(count)
    ]


# C calls that let the interpreter lock go while they run, so others do not wait them out.
_RELEASES_LOCK = {"crc32"}


class _Holds:
    """The longest C call that ran no Python code, and the collector's longest pass, in
    thread CPU milliseconds, while installed as the profile function of this thread."""

    def __init__(self, over_ms: float) -> None:
        self.over_ms = over_ms  # shorter calls are not looked at
        self.calls: list[list[Any]] = []  # open C calls: [start, name, ran Python]
        self.longest = (0.0, "")
        self.by_place: dict[str, float] = {}  # each place's longest call
        self.gc_longest = 0.0
        self._gc_start = 0

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self.calls.append([time.thread_time_ns(), getattr(arg, "__qualname__", "?"), False])
        elif event in ("c_return", "c_exception") and self.calls:
            began, name, ran_python = self.calls.pop()
            spent = (time.thread_time_ns() - began) / 1e6
            if not ran_python and spent > self.over_ms and name not in _RELEASES_LOCK:
                where = f"{name} at {Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
                self.by_place[where] = max(spent, self.by_place.get(where, 0.0))
                if spent > self.longest[0]:
                    self.longest = (spent, where)
        elif event == "call":
            for call in self.calls:  # Python ran inside: it could let the lock go
                call[2] = True

    def collector(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.thread_time_ns()
        else:
            spent = (time.thread_time_ns() - self._gc_start) / 1e6
            self.gc_longest = max(self.gc_longest, spent)


# Where a step's time is a C call that lets the interpreter lock go (zlib's crc32).
_RELEASING_FILES = ("wal_crc.py",)


class _Steps:
    """The longest step between two trace events of this thread's Python (a line begun, a
    call, a return), in thread CPU milliseconds, while installed as its trace function:
    what `_Holds` cannot see, a call of a type (`frozenset(a_list)`, `dict(pairs)`: no
    c_call event) and the freeing of a frame's locals at its return (a list of a million
    items let go at once), in which no other thread gets the interpreter lock either."""

    def __init__(self) -> None:
        self.longest = (0.0, "")
        self._last = time.thread_time_ns()
        self._where = ""

    def begin(self) -> None:
        """Count from now on (what ran before is not the load's)."""
        self._last, self._where = time.thread_time_ns(), "the load's call"

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        spent = (time.thread_time_ns() - self._last) / 1e6
        if spent > self.longest[0] and not self._where.startswith(_RELEASING_FILES):
            self.longest = (spent, self._where)
        name = Path(frame.f_code.co_filename).name
        self._where = f"{name}:{frame.f_lineno} {frame.f_code.co_name} {event}"
        self._last = time.thread_time_ns()  # this function's own time not counted
        return self.trace


# Where the measured load's rows go (--into): a table holding one row; or a table that a
# load of as many rows filled first, the measured rows' times after its rows (appended to
# the partitions it holds) or among them (merged into them).
SHIFTS = {"new": None, "after": 4, "among": 1}


# The table's partitions (--parts): `rev.TRADES`'s, by day and symbol (the bench's CSV puts
# a hundredth of the rows in each), or by day only (all the rows of the CSV in one).
TABLES = {
    "symbols": TRADES,
    "day": TRADES.replace(", SYMBOL(symbol)", ""),
}


def child(
    rows: int, into: str, over_ms: float, parts: str = "symbols", trace_steps: bool = False
) -> None:
    """Load the rows with this process's refimpl; print the figures as JSON."""
    from refimpl import native_memory
    from refimpl.engine.instance import Instance
    from refimpl.engine.storage import bulk, database, values

    native_memory.fix_mmap_threshold()  # as `refimpl serve` sets it: large blocks mapped
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)  # as `refimpl serve` sets it
    sys.setswitchinterval(0.0005)  # as `refimpl serve` sets it: the writer's waits for the GIL
    typed = values.TypedRows(("TIMESTAMP", "SYMBOL", "DOUBLE", "BIGINT"), _rows(rows))
    commit_ms: list[float] = []
    commit = database.Database._commit_load

    @functools.wraps(commit)
    def timed_commit(self: Any, load: Any) -> int:
        began = time.thread_time_ns()
        try:
            return commit(self, load)
        finally:
            commit_ms.append((time.thread_time_ns() - began) / 1e6)

    database.Database._commit_load = timed_commit  # type: ignore[method-assign]
    holds = _Holds(over_ms)
    # Traced, the load's Python runs several times slower: its CPU and the writer's round
    # trips are then not comparable with an untraced run's.
    steps = _Steps() if trace_steps else None
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder) / "data")
        with closing(instance.session()) as session:
            session.execute(TABLES[parts], ())
            session.execute("INSERT INTO trades VALUES (now(), 'S001', 100.0, 1)", ())
            quarters = SHIFTS[into]
            if quarters is not None:  # the table filled first, by a load not measured
                assert session.database.load_rows("trades", typed) is not None
                shift = rows * 10_000 * quarters // 4  # the rows are 10 ms apart
                moved = ((row[0] + shift, *row[1:]) for row in typed)
                typed = values.TypedRows(typed.types, moved)
                commit_ms.clear()
            writes: list[float] = []
            loading = threading.Event()
            writer = threading.Thread(target=_write, args=(instance, loading, writes))
            loading.set()
            writer.start()
            while not writes:  # its first commit (parsing and planning the INSERT) before
                time.sleep(0.001)
            writes.clear()
            began = time.thread_time()
            gc.callbacks.append(holds.collector)
            sys.setprofile(holds.profile)
            if steps is not None:  # from here: not the wait for the writer's first commit
                steps.begin()
                sys.settrace(steps.trace)
            try:
                loaded = session.database.load_rows("trades", typed)
                # The rows let go of as POST /imp does after a load (a checkout whose route
                # has no `bulk.let_go`: at once), a step measured too.
                getattr(bulk, "let_go", list.clear)(typed)
                del typed
            finally:
                sys.settrace(None)
                sys.setprofile(None)
                gc.callbacks.remove(holds.collector)
                loading.clear()
                writer.join()
            spent = time.thread_time() - began
            assert loaded is not None, "the rows did not load by the bulk path"
            session.database.wait_durable(loaded[1])
        instance.close()
    print(
        json.dumps(
            {
                "longest_c_call_ms": holds.longest[0],
                "longest_c_call": holds.longest[1],
                "next_longest": sorted(holds.by_place.items(), key=lambda kv: -kv[1])[1:6],
                "longest_step_ms": steps.longest[0] if steps else float("nan"),
                "longest_step": steps.longest[1] if steps else "",
                "longest_gc_pass_ms": holds.gc_longest,
                "commit_ms": sum(commit_ms),
                "load_cpu_s": spent,
                "writer_p99_ms": harness.summary(writes)["p99"] if writes else 0.0,
                "writer_max_ms": max(writes, default=0.0),
            }
        )
    )


def _write(instance: Any, loading: threading.Event, out: list[float]) -> None:
    """Commit a single-row INSERT every 10 ms while `loading` is set; each one's wall ms."""
    with closing(instance.session()) as session:
        while loading.is_set():
            began = time.monotonic()
            session.execute("INSERT INTO trades VALUES (now(), 'S002', 1.0, 1)", ())
            out.append((time.monotonic() - began) * 1000)
            time.sleep(max(0.0, began + 0.01 - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the load")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is printed")
    parser.add_argument("--code", action="append", type=Path, help="a checkout to measure")
    parser.add_argument(
        "--into",
        choices=sorted(SHIFTS),
        default="new",
        help="new: a table holding one row; after/among: a table that as many rows filled"
        " first, the measured rows' times after theirs or among them",
    )
    parser.add_argument(
        "--over",
        type=float,
        default=1.0,
        help="C calls shorter than this (ms) are not counted; an import's switch interval"
        " is 0.2 ms",
    )
    parser.add_argument(
        "--parts",
        choices=sorted(TABLES),
        default="symbols",
        help="the table's partitions: by day and symbol (the bench's table), or by day only"
        " (the load's rows all in one partition)",
    )
    parser.add_argument(
        "--steps",
        action="store_true",
        help="also the longest step between two Python lines (traced: the load's CPU and the"
        " writer's round trips are then those of a slower run)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rows, args.into, args.over, args.parts, args.steps)
        return
    codes: list[Path] = list(args.code or [harness.REPO])
    results = harness.alternate_children(
        __file__,
        codes,
        args.runs,
        [
            *("--rows", str(args.rows), "--into", args.into, "--over", str(args.over)),
            *("--parts", args.parts),
            *(["--steps"] if args.steps else []),
        ],
    )
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    table = []
    for code, runs in results.items():

        def median(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return sorted(run[key] for run in runs)[len(runs) // 2]

        worst = max(runs, key=lambda run: run["longest_c_call_ms"])["longest_c_call"]
        worst_step = max(runs, key=lambda run: run["longest_step_ms"])["longest_step"]
        table.append(
            (
                str(code),
                median("longest_c_call_ms"),
                median("longest_step_ms"),
                median("longest_gc_pass_ms"),
                median("commit_ms"),
                median("load_cpu_s"),
                median("writer_p99_ms"),
                median("writer_max_ms"),
                worst,
                worst_step,
            )
        )
    harness.print_table(
        (
            "checkout",
            "longest C call ms",
            "longest step ms",
            "longest gc pass ms",
            "commit (locks held) ms",
            "load CPU s",
            "writer p99 ms",
            "writer max ms",
            "the longest call (worst run)",
            "the step after which the longest (worst run)",
        ),
        table,
        title=f"a load of {args.rows:,} rows into a {args.into} table partitioned by"
        f" {'day' if args.parts == 'day' else 'day and symbol'}, thread CPU, median of"
        f" {args.runs} run(s);"
        f" load average at the end {load}",
    )
    for code, runs in results.items():
        worst_run = max(runs, key=lambda run: run["longest_c_call_ms"])
        following = ", ".join(f"{place} {ms:.2f} ms" for place, ms in worst_run["next_longest"])
        print(f"{code}: the next longest C calls (worst run): {following}")


if __name__ == "__main__":
    main()
