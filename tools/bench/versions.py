"""Two revisions of refimpl side by side: the change stream, the event stream and /exec.

Each revision (`--old`, `--new`: a git revision, checked out by `git worktree` into a
temporary folder removed at the end, or the folder of a checkout already made) runs the same
benchmarks of this folder, the current ones: only the server (or, for `changes()`, the
embedded engine) comes from the revision's code. In each round every measure runs against
the two revisions one after the other, the order swapped every round, so that what else the
machine does weighs on both alike. Measures, at each round:

- `changes()` embedded: rows/s reading the N rows (written once per revision by its own
  code, in transactions of 100) in pages of 1,000 (`SELECT * FROM changes('t', after,
  1000)`), and that process's CPU per row; in a process of its own on the revision's code;
- `/api/changes` JSON and SSE at limit=1,000 (`changes_read.py`'s readers), and JSON
  shaped by `where=v >= 0&squash=true&types=true` (a plain feed is encoded from the log's
  runs; a shaped one makes each change a `Change` record), a fresh server on the same data
  each time: rows/s and the server's CPU per row;
- the event stream: S streams of `/stream/changes` (`stream_readers.Readers`) while one
  writer commits 20 single-row INSERTs a second: commit-to-event p50/p99 and the server's
  CPU per commit; then single-row commits/s of 4 writers with the streams open; every
  stream must get every event once, in order (`stream_readers.exactly_once`);
- `/exec` at 16 clients (`http.py`'s load generator): point SELECT and one-row INSERT
  requests/s, p99 and the server's CPU per request.

The table gives each measure's median over the rounds for the two revisions, the ratio
new/old of the medians, the range of the rounds' own ratios (how far one round strays: the
noise), and whether higher or lower is better; the load average (1 minute) is printed at the
start and after each round. A run stopped early (^C, `timeout`) prints the rounds it did.
CPU figures come in the kernel's 10 ms ticks: one taken over a few ticks (the stream's CPU
per commit over 40 commits in --quick) is coarse, and more rows or seconds sharpen it.

    python tools/bench/versions.py                        # 46bb21e against HEAD, 5 rounds
    python tools/bench/versions.py --quick                # 3 rounds, smaller: ~10 min
                                                          # at load 9 to 15 on 2 cores
    python tools/bench/versions.py --old HEAD --new ../scratch --rounds 7
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import harness
from changes_read_ours import read_changes_http, read_changes_sse
from stream import figures_of, paced
from stream_readers import Readers, exactly_once
from stream_throughput import Throughput

bench_http = harness.bench_http()  # this folder's http.py

PAGE = 1000
# The shaped read's options: each change made a `Change` record, filtered, squashed and
# typed (every row passes: the rows/s stay comparable with the plain read's).
SHAPED = {"where": "v >= 0", "squash": "true", "types": "true"}
TXN_ROWS = 100
STREAM_ENV = {
    "KDB_STREAM_CAPACITY": "2000",
    "KDB_STREAMS_PER_TOKEN": "2000",
    "KDB_STREAMS_PER_USER": "2000",
    "KDB_MAX_CONNECTIONS_PER_ADDRESS": "5000",
}

# Run by the revision's Python path: writes the rows (`write`) or reads them back through
# changes() (`read`), and prints one JSON line. Its `refimpl` must be the revision's: the
# caller checks the path it prints.
EMBEDDED = """
import json, sys, time
import refimpl
job, folder = sys.argv[1], sys.argv[2]
with refimpl.connect(folder) as connection:
    if job == "write":
        rows, txn = int(sys.argv[3]), int(sys.argv[4])
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
        start = connection.instance.database("demo").log.durable_lsn
        session = connection.session()
        for first in range(0, rows, txn):
            batch = [(i, i * 0.5, f"row {i}") for i in range(first, min(rows, first + txn))]
            session.insert_rows("t", ["id", "v", "s"], batch)
        session.close()
        out = {"start": start}
    else:
        after, page = int(sys.argv[3]), int(sys.argv[4])
        count = 0
        cpu, began = time.process_time(), time.perf_counter()
        while True:
            rows = connection.execute(f"SELECT * FROM changes('t', {after}, {page})").rows
            if not rows:
                break
            count += sum(1 for row in rows if row[3] == "upsert")
            after = rows[-1][0]
        out = {"seconds": time.perf_counter() - began, "cpu": time.process_time() - cpu,
               "count": count}
print(json.dumps({"refimpl": refimpl.__file__, **out}))
"""


# --- the revisions ---------------------------------------------------------------------------


class Revision:
    """One side of the comparison: its code's folder, and the data folder its embedded
    engine wrote (the same rows for both sides, each written by its own code).

    A plain class: `dataclasses` imports `copy`, which this folder's copy.py would shadow
    before `harness` is imported."""

    def __init__(self, name: str, code: Path) -> None:
        self.name = name
        self.code = code
        self.data = Path()
        self.start = 0  # the LSN before the rows

    def embedded(self, *args: str) -> dict[str, Any]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.code), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        done = subprocess.run(
            [sys.executable, "-c", EMBEDDED, *args],
            cwd=self.code,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: the embedded engine failed:\n{done.stderr}")
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        if not Path(out["refimpl"]).resolve().is_relative_to(self.code.resolve()):
            raise RuntimeError(f"{self.name}: refimpl was imported from {out['refimpl']}")
        return out

    def server(self, **options: Any) -> harness.RefimplServer:
        return harness.RefimplServer(code=self.code, **options)


@contextlib.contextmanager
def checkouts(specs: list[str], folder: Path) -> Iterator[list[Revision]]:
    """A `Revision` for each spec: an existing checkout's folder as it is, or a git revision
    checked out by `git worktree add` under `folder`, removed again at the end."""
    made: list[Path] = []
    revisions = []
    try:
        for n, spec in enumerate(specs):
            if (Path(spec) / "refimpl").is_dir():
                revisions.append(Revision(spec, Path(spec).resolve()))
                continue
            commit = _git("rev-parse", "--verify", f"{spec}^{{commit}}")
            path = folder / f"side{n}-{commit[:9]}"
            _git("worktree", "add", "--detach", str(path), commit)
            made.append(path)
            revisions.append(Revision(f"{spec} ({commit[:9]})", path))
        yield revisions
    finally:
        for path in made:
            subprocess.run(
                ["git", "-C", str(harness.REPO), "worktree", "remove", "--force", str(path)],
                capture_output=True,
            )
        if made:
            subprocess.run(["git", "-C", str(harness.REPO), "worktree", "prune"])


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(harness.REPO), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


# --- measures: each returns {measure: figure} for one revision -------------------------------

Figures = dict[str, float]


def changes_sql(side: Revision, rows: int) -> Figures:
    out = side.embedded("read", str(side.data), str(side.start), str(PAGE))
    if out["count"] != rows:
        print(f"  warning: {side.name}: changes() gave {out['count']} rows of {rows}")
    return {
        "changes() limit=1000 rows/s": rows / out["seconds"],
        "changes() CPU us/row": out["cpu"] / rows * 1e6,
    }


def changes_http(side: Revision, rows: int) -> Figures:
    figures = {}
    reads: list[tuple[str, Callable[..., float]]] = [
        ("json", read_changes_http),
        ("sse", read_changes_sse),
        ("json shaped", lambda *args: read_changes_http(*args, options=SHAPED)),
    ]
    for form, read in reads:
        # A fresh server each time: a page read before would come from its shared answers.
        with side.server(threads=16, data=side.data) as server:
            cpu = harness.cpu_seconds(server.pid)
            said = io.StringIO()
            with contextlib.redirect_stdout(said):
                rate = read(server, side.start, rows, PAGE)
            cpu = harness.cpu_seconds(server.pid) - cpu
        for line in said.getvalue().splitlines():
            if "warning" in line:
                print(f"  {side.name}: {line.strip()}")
        figures[f"/api/changes {form} limit=1000 rows/s"] = rate
        figures[f"/api/changes {form} server CPU us/row"] = cpu / rows * 1e6
    return figures


def event_stream(side: Revision, streams: int, seconds: float) -> Figures:
    with side.server(threads=16, env=STREAM_ENV) as server:
        server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        target = {"kind": "refimpl", "url": server.url, "token": server.token}
        readers = Readers(target, streams)
        committed: list[range] = []  # every id committed: what each stream must show
        try:
            readers.wait_ready()
            time.sleep(1.0)
            cpu = harness.cpu_seconds(server.pid)
            ids = paced(target, 20, seconds, 1)
            committed.append(ids)
            cpu = harness.cpu_seconds(server.pid) - cpu
            time.sleep(1.0)  # the last events' latencies
            readers.timed(False)
            throughput = Throughput(target, 10_000_000, seconds)
            committed += throughput.committed
        finally:
            by_ident, tallies = readers.results(sum(len(some) for some in committed))
    once = exactly_once(tallies, committed)
    if once != "yes":
        print(f"  warning: {side.name}: event streams: {once}")
    latency = figures_of(by_ident, ids, streams)
    return {
        f"stream x{streams} commit-to-event p50 ms": latency["p50"],
        f"stream x{streams} commit-to-event p99 ms": latency["p99"],
        f"stream x{streams} server CPU ms/commit at 20/s": cpu * 1000 / len(ids),
        f"stream x{streams} open: commits/s, 4 writers": throughput.rate,
    }


def exec_requests(side: Revision, seconds: float) -> Figures:
    figures = {}
    with side.server(threads=16) as server:
        target = bench_http.prepare_refimpl(server, "lean")
        for n, op in enumerate(("select", "insert")):
            got = bench_http.run_phase(target, op, 16, 4, seconds, n * 10**9)
            if got["errors"]:
                print(f"  warning: {side.name}: /exec {op}: {got['errors']:.0f} errors")
            figures[f"/exec {op} x16 req/s"] = got["rate"]
            figures[f"/exec {op} x16 p99 ms"] = got["p99"]
            figures[f"/exec {op} x16 server CPU ms/req"] = got["cpu_ms"]
    return figures


def higher_is_better(measure: str) -> bool:
    return any(unit in measure for unit in ("rows/s", "req/s", "commits/s"))


# --- the run ---------------------------------------------------------------------------------


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", default="46bb21e", help="git revision or checkout folder")
    parser.add_argument("--new", default="HEAD", help="git revision or checkout folder")
    parser.add_argument("--rounds", type=int, default=None, help="default 5 (--quick: 3)")
    parser.add_argument("--rows", type=int, default=None, help="changes read (200,000)")
    parser.add_argument("--streams", type=int, default=None, help="event streams (200)")
    parser.add_argument("--seconds", type=float, default=None, help="per phase (5)")
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds, 50,000 rows, 50 streams, 2 s phases"
    )
    parser.add_argument(
        "--only",
        default="changes,http,stream,exec",
        help="measures to run, comma-separated: changes (changes()), http (/api/changes),"
        " stream, exec",
    )
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    rows = args.rows or (50_000 if args.quick else 200_000)
    streams = args.streams or (50 if args.quick else 200)
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    only = set(args.only.split(","))
    measures: list[tuple[str, Callable[[Revision], Figures]]] = [
        ("changes", lambda side: changes_sql(side, rows)),
        ("http", lambda side: changes_http(side, rows)),
        ("stream", lambda side: event_stream(side, streams, seconds)),
        ("exec", lambda side: exec_requests(side, seconds)),
    ]
    measures = [(name, run) for name, run in measures if name in only]
    began, load_start = time.monotonic(), load()
    print(f"load average {load_start} at the start", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="kdb-versions-"))
    # figures[side][measure]: one figure a round
    figures: list[dict[str, list[float]]] = [{}, {}]
    loads = [load_start]
    names = [args.old, args.new]
    header = f"{rows:,} changes, {streams} streams, {seconds:g} s phases"
    try:
        with checkouts([args.old, args.new], folder) as sides:
            names = [side.name for side in sides]
            if only & {"changes", "http"}:
                for n, side in enumerate(sides):
                    side.data = folder / f"data{n}"
                    side.start = side.embedded("write", str(side.data), str(rows), str(TXN_ROWS))[
                        "start"
                    ]
            for number in range(rounds):
                order = [0, 1] if number % 2 == 0 else [1, 0]
                for name, run in measures:
                    for n in order:
                        took = time.monotonic()
                        for measure, value in run(sides[n]).items():
                            figures[n].setdefault(measure, []).append(value)
                        print(
                            f"  {name}: {sides[n].name}, {time.monotonic() - took:.0f} s,"
                            f" load average {load()}",
                            flush=True,
                        )
                loads.append(load())
                print(f"round {number + 1} of {rounds} done, load average {loads[-1]}", flush=True)
    except (KeyboardInterrupt, SystemExit):
        # Stopped (^C, a `timeout`): the rounds done so far still give their figures.
        if len(loads) > 1:
            print(f"stopped after {len(loads) - 1} rounds; their figures:")
            print_figures(figures, names, loads, header)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{time.monotonic() - began:.0f} s")
    print_figures(figures, names, loads, header)


def print_figures(
    figures: list[dict[str, list[float]]], names: list[str], loads: list[str], header: str
) -> None:
    """The table: each measure's medians over the rounds done, their ratio new/old, the
    range of the rounds' own ratios."""
    old, new = figures
    table = []
    for measure, olds in old.items():
        news = new.get(measure, [])[: len(olds)]
        olds = olds[: len(news)]
        if not olds:
            continue
        ratios = [b / a for a, b in zip(olds, news, strict=True) if a]
        table.append(
            (
                measure,
                statistics.median(olds),
                statistics.median(news),
                statistics.median(news) / statistics.median(olds),
                f"{min(ratios):.2f}..{max(ratios):.2f}" if ratios else "-",
                "higher" if higher_is_better(measure) else "lower",
            )
        )
    harness.print_table(
        ("measure", "old", "new", "new/old", "rounds' ratios", "better"),
        table,
        f"old {names[0]}, new {names[1]}: medians of {len(loads) - 1} rounds, {header};"
        f" load average {', '.join(loads)} at the start and after each round",
    )


if __name__ == "__main__":
    main()
