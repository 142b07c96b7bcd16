"""--server-timing of tools/bench/stream.py: the launcher that notes, inside the refimpl server,
its durable commits, fan-out rounds and write requests, and the tables made of those notes."""

from __future__ import annotations

import bisect
import itertools
import os
from pathlib import Path
from typing import Any

import harness

# --server-timing: the server's durable commits, fan-out rounds, write requests and thread
# names, written as JSON to the launcher's first argument when it stops (CLOCK_MONOTONIC, as
# every process here reads it). A write request's split: its time in the worker (wall; CPU
# and run-queue wait from the thread's schedstat), and when its answer was handed over.
TIMING_LAUNCHER = """
import json, sys, threading, time
from refimpl.engine import event_streams
from refimpl.http.serving import connection, server
from refimpl.waiting import room
out, commits, durable, rounds, writes, names = sys.argv[1], [], [], [], [], {}
def named():
    names[threading.get_native_id()] = threading.current_thread().name
def schedstat():
    # The CPU time from the clock: schedstat's is brought up to date only at a switch.
    with open("/proc/thread-self/schedstat") as file:
        waited = file.read().split()[1]
    return time.thread_time(), int(waited) / 1e9
commit = event_streams.EventStreams._commit
def timed_commit(self, key, database):
    commits.append(time.monotonic())
    return commit(self, key, database)
event_streams.EventStreams._commit = timed_commit
on_commit = room.WaitingRoom._on_commit
def timed_on_commit(self):
    durable.append(time.monotonic())
    named()
    return on_commit(self)
room.WaitingRoom._on_commit = timed_on_commit
fanout = room.WaitingRoom._fanout_round
def timed_round(self, requests, finished):
    started, cpu = time.monotonic(), time.thread_time()
    named()
    try:
        return fanout(self, requests, finished)
    finally:
        rounds.append((started, time.monotonic(), time.thread_time() - cpu, len(requests)))
room.WaitingRoom._fanout_round = timed_round
serve_one = connection.Connection.serve_one
def timed_serve_one(self):
    began, (cpu, waited) = time.monotonic(), schedstat()
    named()
    try:
        return serve_one(self)
    finally:
        cpu_after, waited_after = schedstat()
        self.noted = (began, time.monotonic(), cpu_after - cpu, waited_after - waited)
connection.Connection.serve_one = timed_serve_one
deliver = server.PooledWSGIServer._deliver
def timed_deliver(self, handler, answer):
    noted = getattr(handler, "noted", None)
    if noted is not None:
        writes.append((*noted, time.monotonic()))
        handler.noted = None
    return deliver(self, handler, answer)
server.PooledWSGIServer._deliver = timed_deliver
acknowledge = getattr(server.PooledWSGIServer, "_acknowledge", None)
def timed_acknowledge(self, handler, prepared, data, answer):
    noted = getattr(handler, "noted", None)
    if noted is not None:
        writes.append((*noted, time.monotonic()))
        handler.noted = None
    return acknowledge(self, handler, prepared, data, answer)
if acknowledge is not None:  # a write's answer made before its flush (since 2eb6c7f)
    server.PooledWSGIServer._acknowledge = timed_acknowledge
parts = []  # (when, bytes) of each part many streams share
send_shared = server.PooledWSGIServer._send_shared
def noted_send_shared(self, outlets, answer, on_backlog):
    parts.append((time.monotonic(), len(answer.body)))
    return send_shared(self, outlets, answer, on_backlog)
server.PooledWSGIServer._send_shared = noted_send_shared
from refimpl.http.endpoints import stream_route
backlogged, alone = [], []
on_backlog = stream_route._Sender.backlogged
def noted_backlog(self):
    backlogged.append(time.monotonic())
    return on_backlog(self)
stream_route._Sender.backlogged = noted_backlog
attempt = stream_route._Sender.attempt
def noted_attempt(self, lsn):
    alone.append(time.monotonic())
    return attempt(self, lsn)
stream_route._Sender.attempt = noted_attempt
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    names.update({t.native_id: t.name for t in threading.enumerate()})
    with open(out, "w") as file:
        json.dump({"commits": commits, "durable": durable, "rounds": rounds,
                   "writes": writes, "threads": names, "backlogged": backlogged,
                   "alone": alone, "parts": parts}, file)
sys.exit(status)
"""


def threads_schedstat(pid: int) -> dict[int, tuple[float, float]]:
    """By thread id: its CPU seconds and seconds spent runnable waiting for a core."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu, waited, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(cpu) / 1e9, int(waited) / 1e9)
    return out


def server_timing(noted: dict[str, Any], window: list[float], streams: int) -> list[list[Any]]:
    """Rows of the server's own figures at 20 commits/s (see TIMING_LAUNCHER)."""
    rounds = sorted(noted["rounds"])
    starts = [r[0] for r in rounds]
    waits, outs, going_on, after = [], [], [], []
    for at in noted["commits"]:
        if window[0] <= at <= window[1]:
            found = bisect.bisect_left(starts, at)
            if found < len(rounds):
                waits.append((rounds[found][0] - at) * 1000)
                outs.append((rounds[found][1] - at) * 1000)
                # The wait split: for the round the commit came in to end, then for the next
                # to start (the pace's wait, and the room's thread getting a core).
                ends = rounds[found - 1][1] if found else at
                going_on.append(max(0.0, ends - at) * 1000)
                after.append((rounds[found][0] - max(at, ends)) * 1000)
    big = [r for r in rounds if window[0] <= r[0] <= window[1] and r[3] >= streams // 2]
    cpu = harness.summary([r[2] * 1000 for r in big]) if big else {"p50": float("nan")}
    per_stream = harness.summary([r[2] / r[3] * 1e6 for r in big]) if big else cpu
    wall = harness.summary([(r[1] - r[0]) * 1000 for r in big]) if big else cpu
    a, b = harness.summary(waits), harness.summary(outs)
    c, d = harness.summary(going_on), harness.summary(after)
    return [
        ["commit to round start ms p50/p99", f"{a['p50']:.1f} / {a['p99']:.1f}"],
        ["  of it: the round going on ms p50/p99", f"{c['p50']:.1f} / {c['p99']:.1f}"],
        ["  of it: then to the next start ms p50/p99", f"{d['p50']:.1f} / {d['p99']:.1f}"],
        ["commit to last send ms p50/p99", f"{b['p50']:.1f} / {b['p99']:.1f}"],
        [f"rounds of >= {streams // 2} streams", str(len(big))],
        ["round CPU ms p50 (wall ms p50)", f"{cpu['p50']:.1f} ({wall['p50']:.1f})"],
        ["round CPU us per stream p50", f"{per_stream['p50']:.1f}"],
    ]


def _part_kb(sizes: list[int]) -> str:
    """The median and largest of `sizes` (bytes) in KB, or 'none'."""
    if not sizes:
        return "none"
    return f"{harness.summary([s / 1024 for s in sizes])['p50']:.0f}, {max(sizes) / 1024:.0f}"


def _thread_kind(name: str) -> str:
    return "workers" if name.startswith("kdb-http-") else name.removeprefix("kdb-")


def throughput_timing(noted: dict[str, Any], phase: dict[str, Any], streams: int) -> dict[str, str]:
    """Where a commit's time and the server's threads' went in a throughput phase, by row
    label (see TIMING_LAUNCHER)."""
    done = phase["run"]
    began, ended = done.began, done.ended
    span = ended - began
    durable = sorted(noted["durable"])
    writes = [w for w in noted["writes"] if began <= w[0] <= ended]
    parts: dict[str, list[float]] = {
        "worker": [],
        "cpu": [],
        "run queue": [],
        "rest": [],
        "durable": [],
        "answer": [],
    }
    for start, end, cpu, queued, answered in writes:
        parts["worker"].append((end - start) * 1000)
        parts["cpu"].append(cpu * 1000)
        parts["run queue"].append(queued * 1000)
        parts["rest"].append((end - start - cpu - queued) * 1000)
        found = bisect.bisect_left(durable, end)
        at = durable[found] if found < len(durable) and durable[found] <= answered else answered
        parts["durable"].append((at - end) * 1000)
        parts["answer"].append((answered - at) * 1000)
    p50 = {k: harness.summary(v)["p50"] for k, v in parts.items()}
    rounds = [r for r in noted["rounds"] if began <= r[0] <= ended]
    big = [r for r in rounds if r[3] >= streams // 2]
    per_stream = harness.summary([r[2] / r[3] * 1e6 for r in big])["p50"]
    before, after = phase["threads"]
    names = {int(k): v for k, v in noted["threads"].items()}
    kinds: dict[str, list[float]] = {}
    for tid, (cpu, queued) in after.items():
        cpu0, queued0 = before.get(tid, (0.0, 0.0))
        kind = kinds.setdefault(_thread_kind(names.get(tid, "other")), [0.0, 0.0])
        kind[0] += (cpu - cpu0) / span * 100
        kind[1] += (queued - queued0) / span * 100
    walls = harness.summary([(r[1] - r[0]) * 1000 for r in big])["p50"]
    # Between one round's end and the next one's start, in units of the first one's CPU (the
    # pacing's factor), and how many durable commits each round carried.
    ordered = sorted(rounds)
    gaps = [(b[0] - a[1]) / a[2] for a, b in itertools.pairwise(ordered) if a[2] > 0]
    carried = [
        bisect.bisect_left(durable, b[0]) - bisect.bisect_left(durable, a[0])
        for a, b in itertools.pairwise(ordered)
    ]
    rows = {
        "client's commit latency ms p50, p99":
            f"{done.latency['p50']:.2f}, {done.latency['p99']:.2f}",
        "in the worker ms p50: wall": f"{p50['worker']:.2f}",
        "  of it CPU / waiting for a core / rest":
            f"{p50['cpu']:.2f} / {p50['run queue']:.2f} / {p50['rest']:.2f}",
        "parked to durable ms p50 (flush)": f"{p50['durable']:.2f}",
        "durable to answer handed over ms p50": f"{p50['answer']:.2f}",
        "fan-out rounds; their CPU, % of the phase":
            f"{len(rounds)}; {sum(r[2] for r in rounds) / span * 100:.1f}",
        "round of all: CPU us per stream, wall ms p50": f"{per_stream:.1f}, {walls:.1f}",
        "rounds: gap after one / its CPU p50; commits a round carries p50":
            f"{harness.summary(gaps)['p50']:.1f};"
            f" {harness.summary([float(c) for c in carried])['p50']:.0f}",
        "shared parts: KB p50, max":
            _part_kb([p[1] for p in noted.get("parts", []) if began <= p[0] <= ended]),
        "streams backlogged; takes alone":
            f"{sum(began <= t <= ended for t in noted['backlogged'])};"
            f" {sum(began <= t <= ended for t in noted['alone'])}",
        "server CPU ms per commit": f"{phase['server_pct'] * 10 / done.rate:.2f}",
    }  # fmt: skip
    for kind, (cpu, queued) in sorted(kinds.items()):
        rows[f"thread {kind}: CPU % / waiting for a core %"] = f"{cpu:.0f} / {queued:.0f}"
    return rows
