"""1,000 open event streams (`GET /stream/changes`) against PostgreSQL LISTEN/NOTIFY, one run.

A writer commits single-row INSERTs into `c (id, sent)`, `sent` being its clock
(CLOCK_MONOTONIC, shared by all processes) just before the request; a stream's latency for
a commit is its clock when it has the event minus the row's `sent`.

- refimpl: `refimpl serve` (16 threads) with `stream_capacity`, `streams_per_token` and
  `streams_per_user` raised to 2,000. 1,000 streams of table `c`, held by 8 processes of
  non-blocking sockets (a selector each), 125 streams a process.
- PostgreSQL: an AFTER INSERT trigger calls pg_notify('c', id || ',' || sent); 1,000
  listeners (psycopg connections that ran LISTEN c) in 8 processes, read without blocking
  (a selector over the connections, `pgconn.consume_input` and `notifies`).

Every stream (listener) reads every event, the whole run. While latencies are measured a
reader parses each event; during the throughput phases it reads cheaply: a reader process
wakes at most every 50 ms and reads each plain stream raw, all that came meanwhile into one
buffer, its change events counted in C (a compressed stream is inflated chunk by chunk). At
the end one reference stream, which also noted every row id and event id, must hold every
committed row exactly once, each writer's in its order, and every other stream the
reference's count of change events, the last with the reference's last event id: every
stream got every event once, in order ("exactly once" below).

Figures, for both:
1. commit-to-event p50/p99 at 20 commits/s (target for refimpl: p99 under 50 ms);
2. the highest commit rate (of 20, 50, 100, 200, 400 a second, 5 s each) at which every
   stream (listener) gets every commit with p99 under 500 ms;
3. server memory per open stream (RSS with the streams open minus before, / 1,000; target
   under 50 KB); for PostgreSQL the listeners' backends' RSS / 1,000 (shared pages included);
4. server CPU while the streams are idle (heartbeats only) over 20 s, in % of a core
   (target under 2%);
5. single-row commit throughput (4 writers, 5 s) with the 1,000 streams open against none
   (target at least 0.8x; none is measured before the streams open and again after they
   closed, and the ratio is over the mean of the two, so that a machine whose load changed
   meanwhile tilts it less), twice: as the machine schedules it, and with the readers off the
   server's core. On a 2-core machine the 8 reader processes and the writers compete with
   the server for its cores, which a deployment's remote clients would not: in the second
   figure the server (PostgreSQL: its postmaster and every backend) runs on the first CPU
   alone and the writers and readers on the others (`os.sched_setaffinity`), the readers at
   niceness 19 (they read with what the writers leave), in both phases and for both servers
   alike. The CPU the server and the readers took meanwhile is printed. `--throughput-only`
   measures several such pairs in turn after a warm-up and gives their median ratio, each
   pair's and the spread (`stream_throughput.py`): one pair decides nothing.

Beside them, at 20 commits/s: the server's CPU per commit and the readers' CPU per event
(they share the machine's cores). With `--server-timing` refimpl runs under a launcher that
notes each durable commit, each fan-out round (start, end, CPU time) and each write request
(its wall time in the worker, the CPU, run-queue and the rest of it, when it became durable
and when its answer went out): the server's own commit-to-socket time at 20 commits/s (the
end of the round that carried a commit: its last stream's bytes handed to the socket),
without the readers' scheduling, a round's CPU per stream; and, for the throughput phases
with the streams open, where a commit's time goes and where the server's threads spent it
(CPU, waiting for a core; the rest is waiting for the interpreter lock, a lock or I/O).

    python tools/bench/stream.py                    # full, ~6 min
    python tools/bench/stream.py --quick            # 200 streams, shorter phases
    python tools/bench/stream.py --quick --streams 1000 --server-timing
    python tools/bench/stream.py --quick --streams 1000 --no-postgres --code OTHER_CHECKOUT
                                                    # another revision's refimpl, to compare
    python tools/bench/stream.py --latency-only --streams 1000 --server-timing
                                                    # figure 1 alone (refimpl), ~30 s
    python tools/bench/stream.py --throughput-only --quick --streams 1000 --code OTHER_CHECKOUT
                                                    # figure 5 alone (refimpl), ~2 min: the
                                                    # median of 3 pairs of phases, none open
                                                    # and all open, in turn (--pairs N)
    python tools/bench/stream.py --throughput-only --quick --streams 1000 --deflate
                                                    # the server set to compress streams
                                                    # (stream_compression = deflate), to
                                                    # weigh it; --plain: readers that do not
                                                    # accept deflate (for a server before it
                                                    # was a setting)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from stream_readers import Readers, exactly_once
from stream_throughput import (
    open_ratio,
    processes_cpu,
    throughput_phase,
    throughput_report,
    throughput_run,
    writer,
)
from stream_timing import TIMING_LAUNCHER, server_timing, throughput_timing

RATES = (20, 50, 100, 200, 400)
KEEP_UP_P99_MS = 500.0


def paced(target: dict[str, Any], rate: float, seconds: float, first_id: int) -> range:
    commit = writer(target)
    total = int(rate * seconds)
    began = time.monotonic()
    for k in range(total):
        commit(first_id + k)
        time.sleep(max(0.0, began + (k + 1) / rate - time.monotonic()))
    return range(first_id, first_id + total)


def figures_of(by_ident: dict[int, list[float]], idents: range, streams: int) -> dict[str, float]:
    latencies = [lat for i in idents for lat in by_ident.get(i, [])]
    got = sum(min(len(by_ident.get(i, [])), streams) for i in idents)
    out = harness.summary(latencies) if latencies else {"p50": float("nan"), "p99": float("nan")}
    out["delivered"] = got / max(1, len(idents) * streams)
    return out


def process_rss_mb(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def postgres_pids(pg: harness.Postgres) -> list[int]:
    main = int((pg.data / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
    return [main, *map(int, children)]


def run(
    target: dict[str, Any], pids: Callable[[], list[int]], streams: int, quick: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    seconds = 3.0 if quick else 5.0
    out["none"] = throughput_phase(target, pids, None, 10_000_000, seconds, pinned=False)
    out["pinned_none"] = throughput_phase(target, pids, None, 20_000_000, seconds, pinned=True)
    base_rss = process_rss_mb(pids())
    base_cpu = processes_cpu(pids())
    readers = Readers(target, streams)
    readers.wait_ready()
    opened_cpu = processes_cpu(pids())
    time.sleep(2.0)
    out["kb_per_stream"] = (process_rss_mb(pids()) - base_rss) * 1024 / streams
    idle_s = 10.0 if quick else 20.0
    started = processes_cpu(pids())
    time.sleep(idle_s)
    out["idle_cpu_pct"] = (processes_cpu(pids()) - started) / idle_s * 100
    out["open_cpu_s"] = opened_cpu - base_cpu
    next_id = 1
    readers_cpu = processes_cpu(readers.pids)
    server_pids = pids()
    server_cpu = processes_cpu(server_pids)
    out["window_20"] = [time.monotonic()]
    latency_ids = paced(target, 20, 5.0 if quick else 10.0, next_id)
    out["window_20"].append(time.monotonic())
    out["server_ms_per_commit"] = (
        (processes_cpu(server_pids) - server_cpu) * 1000 / len(latency_ids)
    )
    out["readers_us_per_event"] = (
        (processes_cpu(readers.pids) - readers_cpu) * 1e6 / (len(latency_ids) * streams)
    )
    next_id = latency_ids.stop
    steps = []
    for rate in RATES:
        steps.append((rate, paced(target, rate, seconds, next_id)))
        next_id = steps[-1][1].stop
        time.sleep(1.0)
    time.sleep(1.0)  # late events of the last step still get their latency
    readers.timed(False)
    out["open"] = throughput_phase(target, pids, readers, 50_000_000, seconds, pinned=False)
    out["pinned_open"] = throughput_phase(target, pids, readers, 60_000_000, seconds, pinned=True)
    committed = [
        latency_ids,
        *(ids for _, ids in steps),
        *out["open"]["run"].committed,
        *out["pinned_open"]["run"].committed,
    ]
    by_ident, tallies = readers.results(sum(len(ids) for ids in committed))
    out["exactly_once"] = exactly_once(tallies, committed)
    # None open again, the streams closed: the ratio compares the open phases with the mean
    # of before and after, so that a machine whose load changed meanwhile tilts it less.
    out["none_after"] = throughput_phase(target, pids, None, 70_000_000, seconds, pinned=False)
    out["pinned_none_after"] = throughput_phase(
        target, pids, None, 80_000_000, seconds, pinned=True
    )
    out["at_20"] = figures_of(by_ident, latency_ids, streams)
    out["steps"] = {rate: figures_of(by_ident, ids, streams) for rate, ids in steps}
    kept = [
        r for r, f in out["steps"].items() if f["delivered"] >= 0.999 and f["p99"] < KEEP_UP_P99_MS
    ]
    out["max_rate"] = max(kept, default=0)
    return out


def latency_run(
    target: dict[str, Any], pids: Callable[[], list[int]], streams: int, seconds: float
) -> dict[str, Any]:
    """Figure 1 alone: commit-to-event at 20 commits/s for `seconds`, the server's CPU per
    commit meanwhile, every stream checked to get every event once, in order."""
    readers = Readers(target, streams)
    readers.wait_ready()
    time.sleep(2.0)
    server_pids = pids()
    server_cpu = processes_cpu(server_pids)
    out: dict[str, Any] = {"window_20": [time.monotonic()]}
    latency_ids = paced(target, 20, seconds, 1)
    out["window_20"].append(time.monotonic())
    out["server_ms_per_commit"] = (
        (processes_cpu(server_pids) - server_cpu) * 1000 / len(latency_ids)
    )
    by_ident, tallies = readers.results(len(latency_ids))
    out["exactly_once"] = exactly_once(tallies, [latency_ids])
    out["at_20"] = figures_of(by_ident, latency_ids, streams)
    return out


def figure_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """The figures' table: a row a figure, a column a server."""

    def row(label: str, figure: Callable[[dict[str, Any]], Any]) -> list[Any]:
        return [label, *(figure(result) for result in results)]

    rows = [
        row("p50 ms at 20 commits/s", lambda r: f"{r['at_20']['p50']:.2f}"),
        row("p99 ms at 20 commits/s", lambda r: f"{r['at_20']['p99']:.2f}"),
        row("delivered at 20/s", lambda r: f"{r['at_20']['delivered']:.4f}"),
    ]
    for rate in RATES:
        rows.append(
            row(
                f"{rate}/s: p99 ms, delivered",
                lambda r, rate=rate: (
                    f"{r['steps'][rate]['p99']:.1f}, {r['steps'][rate]['delivered']:.4f}"
                ),
            )
        )
    rows += [
        row("highest rate kept up (/s)", lambda r: r["max_rate"]),
        row("memory per stream KB", lambda r: f"{r['kb_per_stream']:.1f}"),
        row("idle CPU % of a core", lambda r: f"{r['idle_cpu_pct']:.2f}"),
    ]
    for label, none, opened in [
        ("", "none", "open"),
        ("readers off the server's core: ", "pinned_none", "pinned_open"),
    ]:
        phases = [(none, "none open"), (opened, "all open"), (none + "_after", "none open after")]
        for phase, title in phases:
            rows.append(
                row(
                    f"{label}commits/s, {title}",
                    lambda r, phase=phase: f"{r[phase]['run'].rate:.0f}",
                )
            )
        for who in ("server", "readers"):
            rows.append(
                row(
                    f"{label}CPU % of a core, all open: {who}",
                    lambda r, opened=opened, who=who: f"{r[opened][who + '_pct']:.0f}",
                )
            )
    rows += [
        row("every stream got every event once, in order", lambda r: r["exactly_once"]),
        row("server CPU ms per commit at 20/s", lambda r: f"{r['server_ms_per_commit']:.1f}"),
        row("readers' CPU us per event at 20/s", lambda r: f"{r['readers_us_per_event']:.1f}"),
    ]
    return rows


def postgres_run(streams: int, quick: bool) -> dict[str, Any]:
    """The same run against a throwaway PostgreSQL cluster, its trigger notifying."""
    with harness.Postgres({"max_connections": str(streams + 50)}) as pg:
        harness.notify_table(pg)
        return run(
            {"kind": "pg", "conninfo": pg.conninfo}, lambda: postgres_pids(pg), streams, quick
        )


def latency_report(
    ours: dict[str, Any],
    streams: int,
    ended: tuple[float, float, float],
    load: tuple[float, float, float],
    code: Path | None,
    timing: Path | None,
) -> None:
    """What `--latency-only` prints: figure 1, and the server's own timing of it."""
    at_20 = ours["at_20"]
    harness.print_table(
        ["figure", "refimpl"],
        [
            ["p50 ms at 20 commits/s", f"{at_20['p50']:.2f}"],
            ["p99 ms at 20 commits/s", f"{at_20['p99']:.2f}"],
            ["delivered at 20/s", f"{at_20['delivered']:.4f}"],
            ["every stream got every event once, in order", ours["exactly_once"]],
            ["server CPU ms per commit at 20/s", f"{ours['server_ms_per_commit']:.1f}"],
        ],
        f"{streams} streams; load average {load[0]:.1f} at the start, {ended[0]:.1f} at the"
        f" end; refimpl of {code or 'this checkout'}",
    )
    if timing is not None:
        print_timing_at_20(timing, ours, streams)


def print_timing_at_20(timing: Path, ours: dict[str, Any], streams: int) -> dict[str, Any]:
    """Print the server's own timing of the 20 commits/s phase from the file `timing` (which
    it removes); what the server noted, for the other phases' tables."""
    noted: dict[str, Any] = json.loads(timing.read_text())
    timing.unlink()
    harness.print_table(
        ["refimpl's own, at 20 commits/s", ""],
        server_timing(noted, ours["window_20"], streams),
        "server timing",
    )
    return noted


def print_throughput_timing(noted: dict[str, Any], ours: dict[str, Any], streams: int) -> None:
    """The server's own timing of the throughput phases (`noted`: what it wrote)."""
    phases = ["none", "open", "pinned_none", "pinned_open"]
    columns = [throughput_timing(noted, ours[phase], streams) for phase in phases]
    labels = sorted(
        {label for column in columns for label in column},
        key=lambda label: (label.startswith("thread"), label),
    )
    harness.print_table(
        ["refimpl's commits, streams open:", "none", "all", "none, pinned", "all, pinned"],
        [[label, *(column.get(label, "") for column in columns)] for label in labels],
        "server timing (pinned: the readers off the server's core)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--streams", type=int, default=None)
    parser.add_argument(
        "--server-timing",
        action="store_true",
        help="note the server's commits and fan-out rounds (see TIMING_LAUNCHER)",
    )
    parser.add_argument(
        "--code",
        type=Path,
        default=None,
        help="the checkout whose refimpl serves (another revision's, to compare; this one's"
        " by default)",
    )
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="refimpl's commit-to-event at 20 commits/s alone (10 s; 5 with --quick)",
    )
    parser.add_argument(
        "--throughput-only",
        action="store_true",
        help="refimpl's commits/s with the streams open and none, pinned and not, alone"
        " (5 s a phase; 3 with --quick)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=3,
        help="--throughput-only: pairs of phases (none open, all open) measured in turn; the"
        " ratio is their median (stream_throughput.py)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="the readers do not accept deflate: the streams come uncompressed (to weigh the"
        " compression)",
    )
    parser.add_argument(
        "--no-postgres",
        action="store_true",
        help="refimpl alone (to study it; its figures have no PostgreSQL beside)",
    )
    parser.add_argument(
        "--deflate",
        action="store_true",
        help="the server compresses streams for clients that accept it (stream_compression ="
        " deflate; off by default)",
    )
    options = parser.parse_args()
    streams = options.streams or (200 if options.quick else 1000)
    env = {
        "KDB_STREAM_CAPACITY": "2000",
        "KDB_STREAMS_PER_TOKEN": "2000",
        "KDB_STREAMS_PER_USER": "2000",
        "KDB_MAX_CONNECTIONS_PER_ADDRESS": "5000",
    }
    if options.deflate:  # not otherwise: a server of before the setting would refuse it
        env["KDB_STREAM_COMPRESSION"] = "deflate"
    timing = None
    if options.server_timing:
        handle, name = tempfile.mkstemp(prefix="kdb-stream-timing-", suffix=".json")
        os.close(handle)
        timing = Path(name)
    load = os.getloadavg()
    with harness.RefimplServer(
        env=env, profile=timing, launcher=TIMING_LAUNCHER, code=options.code
    ) as server:
        server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        target = {
            "kind": "refimpl",
            "url": server.url,
            "token": server.token,
            "deflate": not options.plain,
        }
        if options.latency_only:
            seconds = 5.0 if options.quick else 10.0
            ours = latency_run(target, lambda: [server.pid], streams, seconds)
        elif options.throughput_only:
            seconds = 3.0 if options.quick else 5.0
            ours = throughput_run(target, lambda: [server.pid], streams, seconds, options.pairs)
        else:
            ours = run(target, lambda: [server.pid], streams, options.quick)
    if options.latency_only:
        latency_report(ours, streams, os.getloadavg(), load, options.code, timing)
        return
    if options.throughput_only:
        throughput_report(ours, streams, os.getloadavg(), load, options.code)
        if timing is not None:
            print_throughput_timing(json.loads(timing.read_text()), ours, streams)
            timing.unlink()
        return
    theirs = None if options.no_postgres else postgres_run(streams, options.quick)
    ended = os.getloadavg()
    results = [ours] if theirs is None else [ours, theirs]
    harness.print_table(
        ["figure", "refimpl", "PostgreSQL"][: len(results) + 1],
        figure_rows(results),
        f"{streams} streams / listeners; load average {load[0]:.1f} at the start,"
        f" {ended[0]:.1f} at the end; refimpl of {options.code or 'this checkout'}",
    )
    if timing is not None:
        print_throughput_timing(print_timing_at_20(timing, ours, streams), ours, streams)
    ratio = open_ratio(ours, "")
    pinned_ratio = open_ratio(ours, "pinned_")
    checks = [
        harness.Check("refimpl p99 commit-to-event at 20/s (ms)", ours["at_20"]["p99"],
                      "< 50", ours["at_20"]["p99"] < 50),
        harness.Check("refimpl memory per open stream (KB)", ours["kb_per_stream"], "< 50",
                      ours["kb_per_stream"] < 50),
        harness.Check("refimpl idle CPU, heartbeats only (% core)", ours["idle_cpu_pct"], "< 2",
                      ours["idle_cpu_pct"] < 2),
        harness.Check("refimpl commits/s with streams open / none", ratio, ">= 0.8",
                      ratio >= 0.8),
        harness.Check("  the same, readers off the server's core", pinned_ratio, ">= 0.9",
                      pinned_ratio >= 0.9),
    ]  # fmt: skip
    if theirs is not None:
        checks += [
            harness.Check("PostgreSQL commits/s with listeners / none",
                          open_ratio(theirs, "")),
            harness.Check("  the same, readers off the server's core",
                          open_ratio(theirs, "pinned_")),
        ]  # fmt: skip
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
