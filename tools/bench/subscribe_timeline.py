"""Where the time of a commit's 100 woken live-query streams goes: `subscribe.py`'s phase of
100 streams of one query (`--phases 100 --per-symbol 100 --stream`), with the server's
timeline of each pass of woken streams and what the clients spend.

Per pass (one job of the owner pool that makes a user's woken parts, then sends them), from
the start of the commit's wake-ups (`WakeBoard.notify`, on the committing thread): when the
pass starts, when its parts are all made, when the commit's flush ended (its leader marked
it durable: `flushed`), when the pass found the commits its parts show durable (where parts
are made while the flush runs: `PassReads.settle`), when the first part is sent and when the
last is (the pass's end); its thread's CPU time making and sending, and the times the system
took that thread off the processor (involuntary switches) or it slept (voluntary: the lock,
a pause) while sending; the pauses of the sends' turns at the interpreter lock
(`fanout.taking_turns`), a commit and how long they lasted. Then the waiters' CPU time a
commit (they share the server's processors: 4 processes, each reading its 25 streams on one
thread; with --threaded-waiters 25 threads a process, which took as much CPU as the server)
and the writer's INSERT round trip. p50/p99 are the bench's commit-to-push
latencies as the waiters read them, arrival p50/p99 as their sockets got them
(`subscribe_waiters.arrival`: without the waiters' own queue).

The server's own side of the push, p50 and p99 over the passes, by its clock: from the
commit's flush's end (durable) to the return of the pass's last send (on loopback a send has
put its bytes in the client's socket when it returns), and from the writer's request to the
wake-ups (its INSERT up to the commit): the bench's latencies, which start at the writer's
clock, are these two and the pass's start and making, then what the waiters' clocks add.
With the --threaded-waiters (25 threads a process) sharing the server's 2 processors, the
pass's sends are taken off the processor by the clients they wake; `--pin` (the server on
one processor, the waiters on the other) shows the push without that.

Then where the p99 is (`commit_tail`): the p99 of 10,000 reads (100 commits of 100) is held
by the one or two commits whose reads are latest, so a median of each segment says nothing
of it. Each commit's marks from its writer's request (woken, pass started, parts made,
flushed, durable, first and last sent, its waiters' last arrival and last read, the INSERT
answered, the sends taken off the processor, the collector's time from the request to the
pass's end), for the median commit and for one of those that hold the p99; and the
waiters' own delay, read less arrival, over all reads.

    python tools/bench/subscribe_timeline.py                       # this tree, one run
    python tools/bench/subscribe_timeline.py --pin                 # the server apart
    python tools/bench/subscribe_timeline.py --before ../old --rounds 3   # in turn
    python tools/bench/subscribe_timeline.py --both-waiters --rounds 3    # the clients' part

On a loaded machine wall times spread twice over between runs of one tree; the counts
(pauses, switches) and CPU times move less.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import harness
import subscribe_phase
from subscribe_report import waiters_text

# The server's notes, written as JSON to the launcher's first argument when it stops.
LAUNCHER = """
import gc, json, sys, threading, time
from refimpl.engine.tracking import signals
try:  # where a pass of woken subscribers is made, at one revision or another
    from refimpl.http.endpoints.woken_batch import Woken
except ImportError:
    from refimpl.http.endpoints.subscribe_route import Woken
from refimpl.waiting import fanout
out, passes, wakes, pauses, flushes, published = sys.argv[1], [], [], [], [], []
collections, collecting = [], []  # the collector's runs: (start, end, generation)
def collected(phase, info):
    if phase == "start":
        collecting.append(time.monotonic())
    elif collecting:
        collections.append((collecting.pop(), time.monotonic(), info["generation"]))
gc.callbacks.append(collected)
def switches():
    with open("/proc/thread-self/status") as file:
        text = file.read()
    return [int(text.split(name + ":")[1].split()[0])
            for name in ("\\nvoluntary_ctxt_switches", "nonvoluntary_ctxt_switches")]
make_all, run_all = Woken._make_all, Woken._run_all
def timed_make_all(self, woken, *rest):
    began, cpu = time.monotonic(), time.thread_time()
    try:
        return make_all(self, woken, *rest)
    finally:
        self._timed = (began, time.monotonic(), time.thread_time() - cpu, switches(), len(woken))
def timed_run_all(self):
    began, cpu, before = time.monotonic(), time.thread_time(), switches()
    self._timed = None
    marks.points = {}
    try:
        return run_all(self)
    finally:
        passes.append((began, self._timed, time.monotonic(), time.thread_time() - cpu,
                       before, switches(), marks.points))
marks = threading.local()  # a pass's points in time: settled, first sent
try:
    from refimpl.engine.features.live_pass import PassReads
except ImportError:
    PassReads = None
if hasattr(PassReads, "settle"):  # parts made while the flush runs, then sent once durable
    settle = PassReads.settle
    def timed_settle(self):
        began = time.monotonic()
        try:
            return settle(self)
        finally:
            points = getattr(marks, "points", {})
            points.setdefault("settle began", began)
            points.setdefault("settled", time.monotonic())
    PassReads.settle = timed_settle
send_headed = fanout.SharedSends.send_headed
def timed_send_headed(self, parts, body):
    def first(parts=parts):
        for n, part in enumerate(parts):
            if n == 0:
                getattr(marks, "points", {}).setdefault("first sent", time.monotonic())
            yield part
    try:
        return send_headed(self, first(), body)
    finally:  # the pass's last body: its last send has returned
        getattr(marks, "points", {})["last sent"] = time.monotonic()
fanout.SharedSends.send_headed = timed_send_headed
Woken._make_all = timed_make_all
Woken._run_all = timed_run_all
notify = signals.WakeBoard.notify
def timed_notify(self, *args):
    wakes.append(time.monotonic())
    return notify(self, *args)
signals.WakeBoard.notify = timed_notify
from refimpl.engine.storage import wal
lead = getattr(wal.WriteAheadLog, "_lead", None)  # a flush's leader: its end, durable
if lead is not None:
    def timed_lead(self, *args):
        try:
            return lead(self, *args)
        finally:
            flushes.append(time.monotonic())
    wal.WriteAheadLog._lead = timed_lead
from refimpl.waiting import room
on_commit = room.WaitingRoom._on_commit  # the publishing thread's acknowledgements
def timed_on_commit(self):
    try:
        return on_commit(self)
    finally:
        published.append(time.monotonic())
room.WaitingRoom._on_commit = timed_on_commit
turns = fanout.taking_turns
def timed_pause(seconds):
    began = time.monotonic()
    time.sleep(seconds)
    pauses.append(time.monotonic() - began)
def timed_turns(items, pause=None, *args, **kwargs):
    return turns(items, timed_pause, *args, **kwargs)
fanout.taking_turns = timed_turns
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    with open(out, "w") as file:
        notes = {"passes": passes, "wakes": wakes, "pauses": pauses, "flushes": flushes}
        json.dump({**notes, "published": published, "collections": collections}, file)
sys.exit(status)
"""


def waiters_cpu() -> float:
    """CPU seconds of this process's children forked from it (the waiters: the same command
    line), not the server's."""
    own = Path("/proc/self/cmdline").read_bytes()
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() != own:
                    continue
                fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run(code: Path | None, commits: int, lean: bool = True, pin: bool = False) -> dict[str, float]:
    """One phase of `code`'s server (None: this tree's): its figures (`lean`: the waiters
    of `subscribe.py --stream`, else those of its --threaded-waiters; `pin`: its --pin, the
    server on a processor alone)."""
    window: list[float] = []  # the waiters' CPU at the commits' start and end
    trips: list[float] = []
    starts: list[float] = []  # when the writer began each commit's request (its clock)
    cpu_seconds, commit_trade = harness.cpu_seconds, subscribe_phase.commit_trade

    def noted_cpu(pid: int) -> float:
        window.append(waiters_cpu())
        return cpu_seconds(pid)

    def timed_trade(writer: harness.LeanHTTP, symbol: str) -> None:
        began = time.monotonic()
        if len(window) == 1:  # within the measured commits
            starts.append(began)
        commit_trade(writer, symbol)
        if len(window) == 1:  # within the measured commits
            trips.append(time.monotonic() - began)

    samples: list[tuple[float, float, float | None]] = []
    out = Path(tempfile.mkdtemp(prefix="kdb-timeline-")) / "timeline.json"
    harness.cpu_seconds, subscribe_phase.commit_trade = noted_cpu, timed_trade
    # subscribe_phase.phase runs ALL_THREADS_LAUNCHER when asked for every thread's profile.
    launcher, subscribe_phase.ALL_THREADS_LAUNCHER = subscribe_phase.ALL_THREADS_LAUNCHER, LAUNCHER
    try:
        figures = subscribe_phase.phase(
            100,
            commits,
            0.1,
            out,
            True,
            lean,
            per_symbol=100,
            code=code,
            every_thread=True,
            pin=pin,
            samples=samples,
        )
    finally:
        harness.cpu_seconds, subscribe_phase.commit_trade = cpu_seconds, commit_trade
        subscribe_phase.ALL_THREADS_LAUNCHER = launcher
    notes = json.loads(out.read_text())
    out.unlink()
    out.parent.rmdir()
    rows: list[list[float]] = []
    wakes = notes["wakes"]
    flushes = notes["flushes"]
    published = notes["published"]
    collections = notes.get("collections", [])
    late = 0  # parts made in passes of a few late wake-ups during the commits
    marks: dict[float, dict[str, float]] = {}  # each commit's, by its request's start
    for began, made, ended, cpu, _before, after, points in notes["passes"]:
        if made is None or made[4] < 50:  # a pass of a few late wake-ups
            if made is not None and starts and starts[0] <= began:
                late += made[4]
            continue
        woke = max((w for w in wakes if w <= began), default=None)
        if woke is None:
            continue
        asked = max((s for s in starts if s <= woke), default=math.nan)
        if not math.isnan(asked) and woke > asked + trips[starts.index(asked)]:
            # Woken after that INSERT's answer: a later commit's (those that end the run).
            asked = math.nan
        made_at, made_end, made_cpu, made_switches, _ = made
        flushed = min((f for f in flushes if f >= woke), default=math.nan)
        if not math.isnan(asked):
            marks[asked] = {
                "woken": woke - asked,
                "pass started": began - asked,
                "parts made": made_end - asked,
                "flushed": flushed - asked,
                "durable": points.get("settled", made_end) - asked,
                "first sent": points.get("first sent", math.nan) - asked,
                "last sent": points.get("last sent", math.nan) - asked,
                "INSERT answered": trips[starts.index(asked)],
                "send off CPU": (after[1] - made_switches[1]) / 1e3,
            }
            # The collector's time from the request to the pass's end (it holds the lock).
            marks[asked]["collecting"] = _overlap(collections, asked, ended)
        rows.append(
            [
                (began - woke) * 1e3,
                (made_end - woke) * 1e3,
                (ended - woke) * 1e3,
                made_cpu * 1e3,
                (cpu - made_cpu) * 1e3,
                after[0] - made_switches[0],
                after[1] - made_switches[1],
                (points.get("settled", made_end) - woke) * 1e3,
                (points.get("first sent", math.nan) - woke) * 1e3,
                (flushed - woke) * 1e3,
                (points.get("last sent", math.nan) - woke) * 1e3,
                (min((p for p in published if p >= flushed), default=math.nan) - woke) * 1e3,
                (woke - asked) * 1e3,
                _handed_off(points, flushes) * 1e3,
            ]
        )
    names = ["pass starts", "made", "sent", "make CPU", "send CPU", "send slept", "send off CPU"]
    names += ["durable", "first sent", "flushed", "last sent", "acknowledged"]
    for k, name in enumerate(names):
        unit = " ms" if k < 5 or k > 6 else ""
        figures[name + unit] = _quantile([r[k] for r in rows], 0.5)
    # The hand-off from the end of the flush a pass waited for to the pass's return from
    # that wait, over the passes that waited (the others found their commits durable once
    # their parts were made); and from the flush's end to the end of the publishing
    # thread's acknowledgements (`WaitingRoom._on_commit`, on the flusher after the flush).
    handed = [r[13] for r in rows]
    figures["passes waiting a commit"] = sum(not math.isnan(h) for h in handed) / commits
    figures["flushed to durable p50 ms"] = _quantile(handed, 0.5)
    figures["flushed to durable p99 ms"] = _quantile(handed, 0.99)
    figures["flushed to acknowledged p50 ms"] = _quantile([r[11] - r[9] for r in rows], 0.5)
    # The server's own side of the push, by its clock: from the commit's flush's end (the
    # leader marked it durable) and from the wake-ups' start to the return of the pass's
    # last send. On loopback a send puts the bytes in the client's socket before it
    # returns: what the clients' clocks add beyond this is their own scheduling.
    last_sent = [r[10] for r in rows]
    from_durable = [r[10] - r[9] for r in rows]
    figures["last sent p99 ms"] = _quantile(last_sent, 0.99)
    figures["durable to last sent p50 ms"] = _quantile(from_durable, 0.5)
    figures["durable to last sent p99 ms"] = _quantile(from_durable, 0.99)
    # Before the wake-ups: the writer's request reaching the server and its INSERT run up to
    # the commit's wake-ups (the bench's latencies start at the writer's clock, as this).
    to_wake = [r[12] for r in rows]
    figures["request to wake p50 ms"] = _quantile(to_wake, 0.5)
    figures["request to wake p99 ms"] = _quantile(to_wake, 0.99)
    figures["request to last sent p99 ms"] = _quantile([r[12] + r[10] for r in rows], 0.99)
    # The figures above are of each commit's pass of its woken streams; a stream whose last
    # part was still in flight at the wake-up makes its part once that one is sent, in a
    # later, small pass, which they leave out: the clients' tail may be these parts.
    figures["late parts a commit"] = late / commits
    pauses = notes["pauses"]
    figures["pauses a commit"] = len(pauses) / commits
    figures["paused ms a commit"] = sum(pauses) * 1e3 / commits
    figures["waiters CPU ms a commit"] = (window[1] - window[0]) * 1e3 / commits
    figures["INSERT round trip ms"] = statistics.median(trips) * 1e3
    figures.update(commit_tail(marks, samples))
    return figures


# A commit's marks, in order along its way, as `commit_tail` gives them.
TAIL_MARKS = [
    "woken",
    "pass started",
    "parts made",
    "flushed",
    "durable",
    "first sent",
    "last sent",
    "last arrived",
    "last read",
    "INSERT answered",
    "send off CPU",
    "collecting",
]


def commit_tail(
    marks: dict[float, dict[str, float]], samples: list[tuple[float, float, float | None]]
) -> dict[str, float]:
    """Where the commits that hold the waiters' p99 spent their time, beside the median
    commit: each commit's marks (seconds from its writer's request: `marks`, by the
    request's start, the server's), with its waiters' last arrival and last read (`samples`:
    each the trade's clock, read and arrival latency, a trade's clock being just after its
    request's start); the commits "holding the p99" are those with a read at or over the
    read latencies' p99 (nearest rank), and the one shown ("tail commit") is the median of
    them by last read. In milliseconds ("send off CPU": the times the pass's sending thread
    was taken off the processor; "collecting": the collector's time up to the pass's end);
    "tail commits" their count, the p99 over the commits of their flush's end, and the
    waiters' own delay (read less arrival) p50 and p99 over the samples."""
    starts = sorted(marks)
    p99 = _quantile([read for _, read, _ in samples], 0.99)
    commits: dict[float, dict[str, float]] = {}
    tail: set[float] = set()
    delays = []
    for sent, read, arrived in samples:
        at = bisect.bisect_right(starts, sent) - 1
        if at < 0:
            continue
        start = starts[at]
        if read >= p99:
            tail.add(start)
        commit = commits.setdefault(start, {**marks[start], "last read": 0.0})
        commit["last read"] = max(commit["last read"], sent - start + read)
        if arrived is not None:
            last = commit.get("last arrived", 0.0)
            commit["last arrived"] = max(last, sent - start + arrived)
            delays.append(read - arrived)
    figures: dict[str, float] = {"tail commits": len(tail)}
    # The flush is in every commit's way (its parts are sent once durable): its own tail.
    flushed = [c.get("flushed", math.nan) * 1e3 for c in commits.values()]
    figures["flushed p99 ms"] = _quantile(flushed, 0.99)
    figures["waiters' delay p50 ms"] = _quantile(delays, 0.5) * 1e3
    figures["waiters' delay p99 ms"] = _quantile(delays, 0.99) * 1e3
    # One of them, all its marks (a median of each mark over them would mix commits): the
    # median by last read.
    ranked = sorted((commits[start] for start in tail), key=lambda c: c["last read"])
    held = ranked[(len(ranked) - 1) // 2] if ranked else {}
    for name in TAIL_MARKS:
        every = [c.get(name, math.nan) * 1e3 for c in commits.values()]
        figures[f"{name}: median commit"] = _quantile(every, 0.5)
        figures[f"{name}: tail commit"] = held.get(name, math.nan) * 1e3
    return figures


def _handed_off(points: dict[str, float], flushes: list[float]) -> float:
    """Seconds from the end of the flush a pass waited for in `PassReads.settle` (the first
    to end after the wait began) to the wait's return; NaN when the pass did not wait (its
    commits were durable: no flush ended during the wait)."""
    began, settled = points.get("settle began"), points.get("settled")
    if began is None or settled is None:
        return math.nan
    ended = min((f for f in flushes if f >= began), default=math.inf)
    return settled - ended if ended <= settled else math.nan


def _overlap(runs: list[list[float]], start: float, end: float) -> float:
    """Seconds of `runs` (each [start, end, ...]) within start..end."""
    return sum(max(0.0, min(end, run[1]) - max(start, run[0])) for run in runs)


def _quantile(samples: list[float], q: float) -> float:
    """The `q` quantile of `samples` (nearest rank), NaNs left out (a pass without the mark:
    nothing of it sent headed); NaN if none is left."""
    kept = sorted(x for x in samples if not math.isnan(x))
    if not kept:
        return math.nan
    return kept[min(len(kept) - 1, math.ceil(q * len(kept)) - 1)]


SHOWN = [
    "p50",
    "p99",
    "arrival p50",
    "arrival p99",
    "last arrival p50",
    "cpu_ms",
    "waiters CPU ms a commit",
    "INSERT round trip ms",
    "pass starts ms",
    "made ms",
    "flushed ms",
    "durable ms",
    "acknowledged ms",
    "passes waiting a commit",
    "flushed to durable p50 ms",
    "flushed to durable p99 ms",
    "flushed to acknowledged p50 ms",
    "first sent ms",
    "sent ms",
    "last sent ms",
    "last sent p99 ms",
    "durable to last sent p50 ms",
    "durable to last sent p99 ms",
    "request to wake p50 ms",
    "request to wake p99 ms",
    "request to last sent p99 ms",
    "late parts a commit",
    "make CPU ms",
    "send CPU ms",
    "send slept",
    "send off CPU",
    "pauses a commit",
    "paused ms a commit",
    "waiters' delay p50 ms",
    "waiters' delay p99 ms",
    "tail commits",
    "flushed p99 ms",
    *(f"{name}: {which}" for name in TAIL_MARKS for which in ("median commit", "tail commit")),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=100, help="commits a run, 0.1 s apart")
    parser.add_argument("--before", type=Path, help="a checkout of an earlier revision")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each, in turn")
    parser.add_argument(
        "--threaded-waiters",
        action="store_true",
        help="as subscribe.py's: 25 threads a process, each parsing as it reads",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="as subscribe.py's: the server on the first processor, the waiters on the others",
    )
    parser.add_argument(
        "--both-waiters",
        action="store_true",
        help="this tree's server read by the threaded and the lean waiters in turn: what the"
        " clients add (their CPU, the sends taken off the processor, reads after arrival)",
    )
    args = parser.parse_args()
    if args.both_waiters and (args.before is not None or args.threaded_waiters):
        parser.error("--both-waiters compares the waiters on this tree: alone")
    # Each column: its name, the checkout whose server runs, whether its waiters are lean.
    codes: list[tuple[str, Path | None, bool]] = [("now", None, not args.threaded_waiters)]
    if args.before is not None:
        codes.insert(0, ("before", args.before, not args.threaded_waiters))
    if args.both_waiters:
        codes = [("threaded", None, False), ("lean", None, True)]
    for name, _, lean in codes:
        chosen = argparse.Namespace(stream=True, threaded_waiters=not lean)
        print(f"{name}'s waiters: {waiters_text(chosen)}", flush=True)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in codes}
    for _ in range(args.rounds):
        for name, code, lean in codes:
            figures = run(code, args.commits, lean, args.pin)
            figures["load"] = os.getloadavg()[0]
            runs[name].append(figures)
            print(name, ", ".join(f"{k} {figures[k]:.2f}" for k in [*SHOWN, "load"]))
    rows = [
        [key, *(statistics.median(f[key] for f in runs[name]) for name, _, _ in codes)]
        for key in [*SHOWN, "load"]
    ]
    harness.print_table(
        ["medians (ms from the wake-ups' start)", *(name for name, _, _ in codes)],
        [[key, *(f"{v:.2f}" for v in values)] for key, *values in rows],
        f"{args.rounds} run(s) of {args.commits} commits, each waking 100 streams",
    )


if __name__ == "__main__":
    main()
