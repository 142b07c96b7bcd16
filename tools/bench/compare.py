"""Every benchmark that has PostgreSQL as its peer, side by side in one run, in one table.

Each script of the list below runs in turn, in its own process, with the environment
variable `harness.CHECKS_FILE_VARIABLE` naming a file: the script's `harness.print_checks`
appends each of its figures there, and this command prints them all at the end as one table:
measure, refimpl, PostgreSQL, ratio (or the figure itself where it is no ratio), target, the
issue that set the target (`SOURCES`: issue 37's beside older issues' the scripts still keep),
met. Each script's own output (its fuller tables) is kept under --out, one file a script.

PostgreSQL 15 is started by each script as a throwaway cluster where it is installed
(Debian's `postgresql`; `harness.postgres_bin` installs it where it may); with
`--no-postgres`, or where no PostgreSQL can be found, a script that can run without its peer
(`--no-postgres` of its own) runs refimpl's side alone, its figures with no ratio, and the
others are skipped and said to be.

Issue 37's targets without a peer are printed by scripts of their own, not run here:
live queries' maintenance and the CPU a commit waking 10 by `subscribe.py`, the bulk load's
writer and `/api/rev` by `bulk_load.py`, the reopen after 1,000,000 commits by
`recovery.py`; the README's table of them says how. Two that have no peer either are run
here as the issue measures them, with or without PostgreSQL: the 1,000 streams' commit
ratio (`stream_throughput`: 3 pairs, readers off the server's core), beside `stream.py`'s
fuller run with PostgreSQL's listeners, and the commit-to-push p99 of 100 subscribers
(`subscribe`: 100 streams of one symbol, each commit waking all).

    python tools/bench/compare.py --quick              # the short form of each script
    python tools/bench/compare.py                      # the full forms (an hour or more)
    python tools/bench/compare.py --only pgwire,http   # some scripts
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import harness

HERE = Path(__file__).resolve().parent


class Bench(NamedTuple):
    """One script: its arguments for the quick and the full run, and whether it runs without
    its peer (`--no-postgres`) or has none (`peerless`: run as it is, a peer or not)."""

    script: str
    quick: tuple[str, ...]
    full: tuple[str, ...]
    what: str
    alone: bool = False
    name: str = ""  # a second run of a script: its own name for --only and its output file
    peerless: bool = False

    @property
    def called(self) -> str:
        return self.name or self.script


BENCHES = (
    # Issue 37's four per-request targets as it measures them: medians of alternating rounds.
    Bench(
        "per_request",
        ("--rounds", "3", "--seconds", "2"),
        (),
        "point SELECT and one-row INSERT, protocol and /exec, 16 clients, alternating rounds",
        alone=True,
    ),
    Bench(
        "simple_query",
        ("--rounds", "3", "--seconds", "2"),
        (),
        "the protocol's simple query at 16 clients, alternating rounds",
        alone=True,
    ),
    Bench("pgwire", ("--quick",), (), "point SELECT and one-row INSERT over the protocol"),
    Bench("http", ("--quick",), (), "point SELECT and one-row INSERT over /exec"),
    Bench(
        "changes_read",
        ("--quick", "--reads-only"),
        ("--reads-only",),
        "change reads: changes(), /api/changes JSON and SSE at 3 page sizes",
    ),
    Bench("changes_latency", ("--quick",), (), "commit-to-event latency, SSE vs LISTEN/NOTIFY"),
    Bench(
        "copy",
        ("--rows", "100000"),
        (),
        "COPY FROM STDIN vs /imp vs PostgreSQL's COPY",
        alone=True,
    ),
    # The quick form keeps the 1,000 streams the target names (stream.py's own --quick has 200).
    Bench(
        "stream",
        ("--quick", "--streams", "1000"),
        (),
        "commit throughput with 1,000 open event streams",
        alone=True,
    ),
    # Issue 37's 1,000-stream figure as it measures it: the median of 3 pairs of phases with
    # the readers off the server's core (the line above is one pair of the fuller run).
    Bench(
        "stream",
        ("--throughput-only", "--quick", "--streams", "1000"),
        ("--throughput-only", "--streams", "1000"),
        "commit throughput with 1,000 open event streams against none, 3 pairs",
        alone=True,
        name="stream_throughput",
    ),
    # Issue 37's commit-to-push p99 with 100 subscribers as the closing notes measure it:
    # 100 streams of one symbol, every commit waking all (its check line: the medians).
    Bench(
        "subscribe",
        ("--phases", "100", "--per-symbol", "100", "--stream", "--quick"),
        ("--phases", "100", "--per-symbol", "100", "--stream", "--rounds", "3"),
        "commit-to-push p99 of 100 stream subscribers, each commit waking all",
        peerless=True,
    ),
    Bench(
        "replication",
        ("--quick",),
        (),
        "logical replication to pg_recvlogical (pgoutput)",
    ),
    Bench("clients", ("--quick",), (), "pandas read_sql and psycopg binary COPY"),
)


class Source(NamedTuple):
    """Where the target of a script's check lines was set: `issue` (said as it is) for each
    line whose label holds `fragment` ("": any line of the script)."""

    script: str
    fragment: str
    issue: str


# The scripts' targets, by the issue that set each (a script's exceptions before its "").
# Issue 37 took over some older ones (/exec's ratios from 3 and 21, the streams' throughput
# pinned, 0.9x, beside 15's 0.8x unpinned); the rest stand as their issues set them.
SOURCES = (
    Source("per_request", "", "issue 37"),
    Source("pgwire", "", "issue 37"),
    Source("http", "p99", "issue 3"),
    Source("http", "", "issue 37"),
    Source("changes_read", "waiting readers", "issue 5"),
    Source("changes_read", "", "issue 37"),
    Source("changes_latency", "", "issue 5"),
    Source("copy", "", "issue 19's bench"),  # the issue asked for the figures, not a bound
    Source("stream", "readers off the server's core", "issue 37"),
    Source("stream", "", "issue 15"),
    Source("replication", "", "issue 35"),
    Source("clients", "", "issue 34"),
    Source("subscribe", "big table", "issue 7"),
    Source("subscribe", "", "issue 37"),
)


def target_source(script: str, label: str) -> str:
    """The issue that set the target of `script`'s check line `label` (`SOURCES`), "?" where
    no entry says."""
    for entry in SOURCES:
        if entry.script == script and entry.fragment in label:
            return entry.issue
    return "?"


def postgres_available() -> bool:
    """Whether a PostgreSQL server is installed (the scripts install it where they may)."""
    return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


def run_bench(bench: Bench, quick: bool, peer: bool, out: Path, record: Path) -> tuple[int, float]:
    """Run one script (without its peer unless `peer`); its output goes to
    `out/<script>.txt`. (exit code, seconds)."""
    arguments = bench.quick if quick else bench.full
    if not peer and not bench.peerless:
        arguments += ("--no-postgres",)
    env = {**os.environ, harness.CHECKS_FILE_VARIABLE: str(record)}
    began = time.monotonic()
    with open(out / f"{bench.called}.txt", "w", encoding="utf-8") as log:
        finished = subprocess.run(
            [sys.executable, str(HERE / f"{bench.script}.py"), *arguments],
            cwd=HERE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return finished.returncode, time.monotonic() - began


def figure(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="each script's short form")
    parser.add_argument("--only", default="", help="comma-separated script names to run")
    parser.add_argument("--no-postgres", action="store_true", help="skip every peer run")
    parser.add_argument("--out", default="", help="folder for each script's own output")
    args = parser.parse_args()

    chosen = [b for b in BENCHES if not args.only or b.called in args.only.split(",")]
    out = Path(args.out or tempfile.mkdtemp(prefix="kdb-compare-"))
    out.mkdir(parents=True, exist_ok=True)
    record = out / "checks.jsonl"
    record.unlink(missing_ok=True)
    peer = not args.no_postgres and postgres_available()
    notes: list[str] = []
    for bench in chosen:
        if not (HERE / f"{bench.script}.py").exists():
            notes.append(f"{bench.called}: no such script here yet, skipped")
            continue
        if not peer and not (bench.alone or bench.peerless):
            notes.append(f"{bench.called}: skipped, no PostgreSQL to compare with")
            continue
        print(f"{bench.called}: {bench.what} ...", flush=True)
        load = os.getloadavg()[0]  # the machine's load moves every figure: said beside them
        code, seconds = run_bench(bench, args.quick, peer, out, record)
        status = "ok" if code == 0 else f"FAILED (exit {code}; see its output)"
        if not peer:
            status += (
                " (no peer)"
                if bench.peerless
                else " (refimpl alone: no PostgreSQL to compare with)"
            )
        notes.append(
            f"{bench.called}: {status}, {seconds:.0f} s, load average {load:.1f} at its start"
            f" and {os.getloadavg()[0]:.1f} at its end, output in {bench.called}.txt"
        )

    rows, issue_37 = [], []  # issue_37: whether each of issue 37's targets was met
    if record.exists():
        for line in record.read_text(encoding="utf-8").splitlines():
            check = json.loads(line)
            source = target_source(check["script"], check["label"]) if check["target"] else ""
            if source == "issue 37":
                issue_37.append(check["met"])
            rows.append(
                (
                    f"{check['script']}: {check['label']}",
                    figure(check["ours"]),
                    figure(check["peer"]),
                    figure(check["value"]),
                    check["target"],
                    source,
                    ("MET" if check["met"] else "MISSED") if check["target"] else "",
                )
            )
    harness.print_table(
        ("measure", "refimpl", "PostgreSQL", "ratio/figure", "target", "set by", ""),
        rows,
        title="refimpl beside PostgreSQL " + ("(quick forms)" if args.quick else "(full forms)"),
    )
    if issue_37:
        print(
            f"issue 37's targets: {sum(issue_37)} of {len(issue_37)} met"
            " (the other targets are older issues')"
        )
    for note in notes:
        print(note)
    print(f"each script's output: {out}")


if __name__ == "__main__":
    main()
