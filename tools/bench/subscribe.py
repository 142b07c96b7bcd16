"""Live queries: commit-to-`rows` latency and server CPU per commit with many subscriptions.

Table `trades (time, symbol, price)` partitioned by SYMBOL(symbol), 1,000 symbols with a few
trades each. Every subscription is a candle query

    SUBSCRIBE SELECT date_trunc('minute', time) AS m, first(price) AS open, max(price) AS high,
      min(price) AS low, last(price) AS close FROM trades WHERE symbol = '<s>'
      GROUP BY m ORDER BY m

created by a first GET /api/subscribe (its snapshot). 100 of them (10 symbols x 10) are held
by waiters (4 processes of 25 threads, each a keep-alive connection of `harness.LeanHTTP`)
that always have a request waiting (asked again with the id of the last answer), or with
--stream each read one stream of its subscription (`stream=true`: no request a commit),
each process reading its 25 streams on one thread and parsing them after the run
(`subscribe_waiters.py`; --threaded-waiters: 25 threads a process, each parsing as it
reads, as before, which took as much CPU a commit as the server on its two processors); the
others sit idle. Every waiter checks its trades (`subscribe_waiters.TradeOrder`): each
once, in order, in its own candle; a phase's `wrong` counts the others, and a p99 with a
trade missing or wrong meets no target. A writer (one `harness.LeanHTTP` connection)
commits one trade at a time (--interval apart) to the 10 watched symbols in turn, its
price being the writer's clock (CLOCK_MONOTONIC) just before the request: a waiter's
latency is its clock when it parses the `rows` answer minus the new candle's `close`.
With --stream, each part's arrival too (`arrived`: when the kernel put its bytes in the
waiter's socket, SO_TIMESTAMPNS, taken at the server's send on loopback): the
commit-to-push time without the waiters' own queue for their processor and their
process's interpreter lock. Server CPU per commit is the server process's utime+stime
(/proc/<pid>/stat) over the commits, divided by their number: the INSERT, the wake-ups,
the re-run queries, the answers and the waiters' next requests.

Shown with 100 subscriptions (only the waiting ones) and with 10,000 (9,900 idle on the
other 990 symbols; the server keeps at most 10,000, so about one may be dropped). A phase of
N subscriptions keeps N (`phase_subscriptions`): min(N, 100) waiting, --per-symbol to each
watched symbol (at least one symbol), and N - 100 idle when N is over 100: --phases 10 is 10
waiters of one symbol that each commit wakes, nothing idle (issue 37's "10 woken
subscribers"). A phase's line says so when the server kept another count before or after
the measured commits (a subscription unasked for 2 minutes is dropped when a request comes:
a long setup, as under callgrind, would have that sweep run inside the measured window).

Then: a table of --big trades (default 1,000,000; --quick 100,000) over 1,000 symbols, 10%
of them on one hot symbol: one subscription waits on an ordinary symbol (about 900 rows) and
one on the hot one; each answers a new trade: median latency. Target < 10 ms (ordinary).

Then, in this process (the engine embedded, no HTTP): each commit's CPU split into
maintenance (the engine bringing maintained answers up to date, as it counts it) and
delivery (encoding the answers' server-sent events), for a candle subscription of one
symbol and a GROUP BY of the whole table (count, sum, max per symbol), each asked by 10
subscriptions, over tables of 10,000 and --big rows and beside 10 to 1,000 idle candle
subscriptions of other symbols.

Targets (issue 37): maintenance under 0.5 ms per commit for both queries, flat in table
size and subscription count; server CPU per commit waking 10 candle subscriptions under
3 ms; commit-to-rows p99 under 10 ms with 100 subscriptions. Figures are shown with the
load average: the machine may be shared.

    python tools/bench/subscribe.py                  # full: 200 commits per phase, ~6 min
    python tools/bench/subscribe.py --quick          # 50 commits, 100,000-trade table
    python tools/bench/subscribe.py --quick --profile  # then the 100 phase, server profiled
    python tools/bench/subscribe.py --maintenance-only --big 1000000  # the split only
    python tools/bench/subscribe.py --quick --stream  # the waiters read streams

Side by side with an earlier revision (a worktree of it), the HTTP phases only, medians of
runs taken in turn, with the server's CPU per commit by thread (the owner pool's threads
make the woken subscribers' answers; the HTTP workers run the INSERT and the long polls'
next requests), then the check lines of the targets a phase measures (`phase_checks`):

    python tools/bench/subscribe.py --phases 100 --before ../old --rounds 3 --stream
    python tools/bench/subscribe.py --phases 100 --per-symbol 100 --stream  # 100 woken
    python tools/bench/subscribe.py --phases 100 --per-symbol 100 --stream --pin  # apart
    python tools/bench/subscribe.py --phases 100 --per-symbol 100 --stream --threaded-waiters
    python tools/bench/subscribe.py --phases 100 --stream --cprofile server.prof

Machine instructions a commit over all the server's threads (valgrind's callgrind), the same
run after run whatever the load; a short run over-weights what a connection or a
subscription does once (its first answer's head, its log line's first shape), alike in both
trees; and at --interval 1 each commit carries a second of the server's own time-driven work
(the room's thread answering the unwoken long polls at their 10 s wait, the main thread's
rounds), which the 100-waiter phases have and --phases 10 (every waiter woken) has less of:

    python tools/bench/subscribe.py --phases 10 --before ../old --rounds 2 --commits 20 \
        --interval 1 --instructions

The parts: `subscribe_phase.py` runs a phase and the big table, `subscribe_waiters.py` the
waiters, `subscribe_split.py` the in-process split, `server_sampling.py` the server's counts by
thread, `subscribe_report.py` the lines, tables and checks; this module parses the arguments
and runs them in order.
"""

from __future__ import annotations

import argparse
import os
import pstats
import sys
import tempfile
from pathlib import Path

import harness
from subscribe_phase import big_table, phase
from subscribe_report import (
    median,
    medians_row,
    p99_check,
    phase_checks,
    print_instructions,
    print_medians,
    print_opcodes,
    print_run,
    print_thread_medians,
    waiters_text,
    whole,
)
from subscribe_split import print_split, split


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=200, help="trade commits per phase")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between commits")
    parser.add_argument("--big", type=int, default=1_000_000, help="trades of the big table")
    parser.add_argument("--quick", action="store_true", help="50 commits, 100,000 trades")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the 100-subscription phase with the server profiled",
    )
    parser.add_argument(
        "--maintenance-only",
        action="store_true",
        help="only the in-process split of each commit's CPU (maintenance, delivery)",
    )
    parser.add_argument(
        "--idle", default="10,100,1000", help="idle subscriptions of other symbols, in turn"
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="the waiters read one stream each (stream=true) instead of long polls",
    )
    parser.add_argument(
        "--threaded-waiters",
        action="store_true",
        help="with --stream: the former waiters, 25 threads a process, each reading and"
        " parsing its stream as it comes (by default a process reads its 25 streams on one"
        " thread and parses them once the run is over: `_lean_stream_waiters`)",
    )
    parser.add_argument(
        "--phases",
        help="only the HTTP phases, with these subscription totals in turn (e.g. 100):"
        " no in-process split, no big table. A total N keeps N: min(N, 100) waiting"
        " (--per-symbol to a watched symbol, all on one when fewer) and N - 100 idle when"
        " over 100; 10 is 10 waiters of one symbol, each commit waking the 10",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="with --phases: a checkout of an earlier revision; each phase runs its server"
        " and this tree's in turn, --rounds times, and the medians are compared",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --phases: runs of each")
    parser.add_argument(
        "--per-symbol",
        type=int,
        default=10,
        help="waiters per watched symbol (10: a commit wakes 10 of the 100; 100: all of"
        " them); a phase of fewer than 100 has its waiters on one symbol",
    )
    parser.add_argument(
        "--opcodes",
        action="store_true",
        help="with --phases: the servers count the Python opcodes their threads run during"
        " the commits (by thread and function; not moved by the machine's load; a hundredfold"
        " slower: use --interval 1 and fewer --commits)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="with --phases: the server on the first CPU alone, the waiters and the writer on"
        " the others (on 2 cores the waiters' processes otherwise take as much CPU as the"
        " server)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with --phases: the servers run under valgrind's callgrind, which counts the"
        " machine instructions of all their threads during the commits (not moved by the"
        " machine's load; some fifty times slower: use --interval 1 and fewer --commits)",
    )
    parser.add_argument(
        "--callgrind-out",
        type=Path,
        help="with --instructions: the last run's callgrind output, kept in this file",
    )
    parser.add_argument("--top", type=int, default=30, help="with --opcodes: functions shown")
    parser.add_argument(
        "--cprofile",
        type=Path,
        help="with --phases: the last run's server has every thread profiled (cProfile)"
        " into this file (pstats)",
    )
    args = parser.parse_args()
    if args.threaded_waiters and not args.stream:
        parser.error("--threaded-waiters read streams: give --stream with them")
    commits = 50 if args.quick else args.commits
    if args.phases:
        compare_phases(args, [int(n) for n in args.phases.split(",")], commits)
        return
    full_run(args, commits)


def full_run(args: argparse.Namespace, commits: int) -> None:
    """Without --phases: the in-process split, the phases of 100 and 10,000 subscriptions, the
    big table, their checks; with --profile the 100 phase again, profiled."""
    big = 100_000 if args.quick else args.big
    # The engine runs in this process too: the repository's packages, and the standard
    # library's modules this folder's scripts shadow (copy.py).
    here = Path(__file__).resolve().parent
    sys.path[:] = [str(harness.REPO)] + [p for p in sys.path if Path(p or ".").resolve() != here]
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if source and name != "__main__" and Path(source).parent == here:
            del sys.modules[name]  # a script of this folder taken for a standard module
    idle = [int(n) for n in args.idle.split(",")]
    results = []
    for size in (10_000, big):
        results += split(size, idle, commits)
    split_checks = print_split(results, commits)
    if args.maintenance_only:
        harness.print_checks(split_checks)
        return

    rows, cpu_checks = [], []
    for total in (100, 10_000):
        f = phase(
            total,
            commits,
            args.interval,
            stream=args.stream,
            lean=args.stream and not args.threaded_waiters,
        )
        cpu_checks.append(
            harness.Check(
                f"server CPU per commit waking 10 candles, {total:,} subscriptions (ms)",
                f["cpu_ms"],
                "< 3 ms",
                f["cpu_ms"] < 3,
            )
        )
        if total == 100:
            cpu_checks.append(
                p99_check("commit-to-rows p99, 100 subscriptions (ms)", f["p99"], whole(f))
            )
        rows.append(
            (
                f"{total:,} subscriptions",
                f["made_per_s"],
                f["n"],
                f["expected"],
                f["p50"],
                f["p99"],
                f["cpu_ms"],
                f["errors"],
                f["wrong"],
            )
        )
    print(f"waiters: {waiters_text(args)}", flush=True)
    harness.print_table(
        (
            "",
            "created/s",
            "answers",
            "expected",
            "p50 ms",
            "p99 ms",
            "CPU ms/commit",
            "errors",
            "wrong",
        ),
        rows,
        title=f"commit-to-rows latency, {commits} single-row trades {args.interval * 1000:g} ms"
        f" apart, each waking the 10 {'streams' if args.stream else 'long polls'} of its"
        " symbol (load average"
        f" {os.getloadavg()[0]:.2f})",
    )
    figures = big_table(big, 30 if args.quick else 100)
    harness.print_table(
        ("candle subscription", "symbol rows", "answers", "p50 ms", "p99 ms", "max ms"),
        [(name, f["rows"], f["n"], f["p50"], f["p99"], f["max"]) for name, f in figures.items()],
        title=f"a new trade in a table of {big:,} trades",
    )
    ordinary = figures["ordinary"]["p50"]
    harness.print_checks(
        [
            *split_checks,
            *cpu_checks,
            harness.Check(
                "median commit-to-rows latency, big table (ms)", ordinary, "< 10 ms", ordinary < 10
            ),
        ]
    )
    if args.profile:
        profile_phase(commits, args.interval)


def compare_phases(args: argparse.Namespace, totals: list[int], commits: int) -> None:
    """The HTTP phases only: each total, this tree's server (and `--before`'s, in turn)
    `--rounds` times; the medians of each figure over the rounds."""
    codes: list[tuple[str, Path | None]] = [("now", None)]
    if args.before is not None:
        codes.insert(0, ("before", args.before))
    kind = "streams" if args.stream else "long polls"
    print(f"waiters: {waiters_text(args)}", flush=True)
    rows, checks = [], []  # checks: this tree's medians against issue 37's targets
    for total in totals:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in codes}
        for turn in range(args.rounds):
            for name, code in codes:
                last = turn == args.rounds - 1 and name == "now"
                figures = phase(
                    total,
                    commits,
                    args.interval,
                    stream=args.stream,
                    lean=args.stream and not args.threaded_waiters,
                    per_symbol=args.per_symbol,
                    code=code,
                    profile=args.cprofile if last and not args.opcodes else None,
                    every_thread=True,
                    opcodes=args.opcodes,
                    pin=args.pin,
                    instructions=args.instructions,
                    keep=args.callgrind_out if last else None,
                )
                figures["load"] = os.getloadavg()[0]
                runs[name].append(figures)
                print_run(name, total, figures)
        for name, _ in codes:
            got = runs[name]
            rows.append(medians_row(f"{name}, {total:,} subscriptions", got, args.stream))
            # Counted runs are slowed a hundredfold or more: their times say nothing of a target.
            if name == "now" and not (args.opcodes or args.instructions):
                checks += phase_checks(
                    total,
                    args.per_symbol,
                    kind,
                    args.rounds,
                    median(got, "p99"),
                    median(got, "cpu_ms"),
                    complete=all(whole(f) for f in got),
                )
            print_thread_medians(f"{name}, {total:,} subscriptions", got)
        if args.opcodes:
            print_opcodes(runs, args.top)
        if args.instructions:
            for name, got in runs.items():
                print_instructions(f"{name}, {total:,} subscriptions", got)
    print_medians(
        rows,
        f"medians of {args.rounds} runs, {commits} trades {args.interval * 1000:g} ms"
        f" apart, each waking {args.per_symbol} {kind}",
    )
    if checks:
        harness.print_checks(checks)


def profile_phase(commits: int, interval: float) -> None:
    """The 100-subscription phase again, the server's worker threads profiled (cProfile)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "server.prof"
        figures = phase(100, commits, interval, profile=path)
        print(f"profiled server, 100 subscriptions: {figures['cpu_ms']:.2f} ms CPU a commit\n")
        stats = pstats.Stats(str(path))
        stats.strip_dirs()
        print("top 25 by cumulative time (worker threads):")
        stats.sort_stats("cumulative").print_stats(25)
        print("top 25 by total time (worker threads):")
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
