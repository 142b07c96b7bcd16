"""Why a round trip was slow during a bulk load: `bulk_load.py --why`.

The server runs under `LAUNCHER`, which records, on the monotonic clock that every process
of this machine shares:

- each /api/rev request's handling (entry to and exit from `App.answer`), and how long its
  worker thread was ready to run but waiting for a CPU (the kernel's schedstat) since its
  previous request: its wait to be run once the request arrived;
- each pass of the collector longer than 1 ms (`gc.callbacks`);
- the import's phases, on its own thread: the conversion (from the /imp request's entry to
  `Database.load_rows`), the load's preparing and merging, its install step
  (`Database._commit_load`, under the write lock) and its wait for the fsync
  (`Database.wait_durable`);
- each time a heartbeat thread (asleep 2 ms at a time) woke more than 3 ms late, with the
  process CPU time in that window, the heartbeat's own wait for a CPU, and where the
  importing thread was when the heartbeat got the interpreter lock back, and how long that
  thread itself waited for a CPU meanwhile (it may hold the interpreter lock while it
  waits: then every thread of the server waits too): the rest of the heartbeat's lateness
  is its wait for the interpreter lock.

`explain` then splits each slow probe of /api/rev: the wait before the server's handler ran
(for a CPU, the rest for the interpreter lock or in the kernel), the handler, and the wait
after it (the answer made, the prober had not got it), and counts which part was longest;
and it counts the probes, slow ones and all, by the import's phase they began in.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

LAUNCHER = """
import gc, json, sys, threading, time
from refimpl.http import app as app_module
out = sys.argv[1]
events = {"gc": [], "late": [], "rev": [], "phases": []}
_gc_began = [0.0]
def on_gc(phase, info):
    if phase == "start":
        _gc_began[0] = time.monotonic()
    else:
        spent = time.monotonic() - _gc_began[0]
        if spent > 0.001:
            events["gc"].append((_gc_began[0], spent * 1000, info["generation"]))
gc.callbacks.append(on_gc)
importer = [0]  # the native id of the thread answering /imp
def queued_ms(thread="thread-self"):
    # A thread's time ready to run but waiting for a CPU, from the kernel's schedstat.
    try:
        with open(f"/proc/{thread}/schedstat") as file:
            return int(file.read().split()[1]) / 1e6
    except OSError:
        return 0.0
# The server calls App.answer (App.__call__, the WSGI entry, only for other servers).
call = app_module.App.answer
local = threading.local()
def timed(self, environ):
    began, queued = time.monotonic(), queued_ms()
    if environ.get("PATH_INFO") == "/imp":
        importer[0] = threading.get_native_id()
        events["phases"].append(("converting", began))
    since = getattr(local, "queued", queued)
    try:
        return call(self, environ)
    finally:
        local.queued = queued_ms()
        if environ.get("PATH_INFO") == "/api/rev":
            events["rev"].append((began, time.monotonic(), queued - since))
app_module.App.answer = timed
from refimpl.engine.storage import database as database_module
def phased(begins, after, function):
    # The import's phases: `begins` at the call's entry, `after` at its exit, on the
    # importing thread only (another writer's wait_durable is not the import's).
    def timed_phase(*args, **kwargs):
        mine = threading.get_native_id() == importer[0]
        if mine:
            events["phases"].append((begins, time.monotonic()))
        try:
            return function(*args, **kwargs)
        finally:
            if mine:
                events["phases"].append((after, time.monotonic()))
    return timed_phase
Database = database_module.Database
Database.load_rows = phased("preparing and merging", "answering", Database.load_rows)
Database._commit_load = phased("installing", "preparing and merging", Database._commit_load)
Database.wait_durable = phased("waiting for the fsync", "answering", Database.wait_durable)
def where_importing(me):
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        inner, f = frame, frame
        while f is not None:
            if f.f_code.co_filename.endswith("ingest_routes.py"):
                name = inner.f_code.co_filename.rsplit("/", 1)[-1]
                return f"{name}:{inner.f_lineno} {inner.f_code.co_name}"
            f = f.f_back
    return ""
def beat():
    me = threading.get_ident()
    while True:
        its = f"self/task/{importer[0]}"
        began, cpu, queued = time.monotonic(), time.process_time(), queued_ms()
        its_queued = queued_ms(its)
        time.sleep(0.002)
        late = time.monotonic() - began - 0.002
        if late > 0.003:
            spent = time.process_time() - cpu
            waited = queued_ms() - queued
            preempted = queued_ms(its) - its_queued
            place = where_importing(me)
            events["late"].append((began, late * 1000, spent * 1000, waited, place, preempted))
threading.Thread(target=beat, daemon=True).start()
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    with open(out, "w") as file:
        json.dump(events, file)
sys.exit(status)
"""

SLOW_MS = 5.0  # a probe slower than this is explained


def explain(samples: list[Any], path: Path, began: float, ended: float) -> None:
    """Print why the probes of /api/rev between `began` and `ended` were slow; `samples`
    are the prober's (sent at, round trip ms, server ms), `path` the launcher's record."""
    events = json.loads(path.read_text())
    handled = sorted(events["rev"])
    gcs = [(at, ms) for at, ms, _ in events["gc"] if began <= at < ended]
    phases = events.get("phases", [])
    lates = [tuple(late) for late in events["late"] if began <= late[0] < ended]
    print(
        f"during the import: {len(gcs)} collector passes over 1 ms (longest"
        f" {max((ms for _, ms in gcs), default=0):.1f} ms); {len(lates)} heartbeat wakes over"
        f" 3 ms late (longest {max((t[1] for t in lates), default=0):.1f} ms): of their"
        f" {sum(t[1] for t in lates):.0f} ms late, {sum(t[3] for t in lates):.0f} ms waiting"
        " for a CPU, the rest for the interpreter lock; meanwhile the importing thread"
        f" waited {sum(t[5] for t in lates):.0f} ms for a CPU"
    )
    for at, ms, generation in events["gc"]:
        if began <= at < ended:
            print(f"  a pass of generation {generation}, {ms:.1f} ms, {_phase_at(phases, at)}")
    parts: dict[str, list[float]] = {
        "waiting for a CPU before the handler": [],
        "waiting for the interpreter lock (or the kernel) before it": [],
        "in the handler": [],
        "after it (sending, the prober's own process)": [],
    }
    causes: Counter[str] = Counter()
    slow = [s for s in samples if began <= s[0] < ended and s[1] > SLOW_MS]
    for sent, round_trip, _server in slow:
        done = sent + round_trip / 1000
        entry, exit_, queued = next(
            ((a, b, q) for a, b, q in handled if sent <= a <= done), (done, done, 0.0)
        )
        before = (entry - sent) * 1000
        spans = [
            min(queued, before),
            max(before - queued, 0.0),
            (exit_ - entry) * 1000,
            (done - exit_) * 1000,
        ]
        for name, spent in zip(parts, spans, strict=True):
            parts[name].append(spent)
        if any(at < entry and at + ms / 1000 > sent for at, ms in gcs):
            causes["a collector pass"] += 1
        else:
            causes[list(parts)[spans.index(max(spans))]] += 1
    total = sum(1 for s in samples if began <= s[0] < ended)
    print(f"{len(slow)} of {total} probes over {SLOW_MS} ms during the import; their time:")
    for name, spans in parts.items():
        if spans:
            print(f"  median {statistics.median(spans):6.1f} ms, max {max(spans):6.1f}: {name}")
    print("their longest part:")
    for cause, count in causes.most_common():
        print(f"  {count:4d}  {cause}")
    _by_phase(samples, phases, began, ended)
    places: Counter[str] = Counter()  # milliseconds the lock was waited for, by place
    for _at, late, _cpu, queued, place, _preempted in lates:
        if place and late - queued > queued:
            places[place] += late - queued
    print("where the importing thread was when the heartbeat got the lock after waiting (ms):")
    for place, spent in places.most_common(8):
        print(f"  {spent:7.1f}  {place}")


def _phase_at(phases: list[tuple[str, float]], at: float) -> str:
    """The import's phase (`phases`: each phase's name and the time it began) at `at`."""
    return next(
        (name for name, began in reversed(sorted(phases, key=lambda p: p[1])) if began <= at),
        "before the handler",
    )


def _by_phase(
    samples: list[Any], phases: list[tuple[str, float]], began: float, ended: float
) -> None:
    """Print the probes sent during the import by the import's phase they were sent in
    (`phases`: each phase's name and the time it began, in order), slow ones and all."""
    marks = sorted((at, name) for name, at in phases)
    if not marks:
        return
    counts: dict[str, list[float]] = {}
    for sent, round_trip, _server in samples:
        if not began <= sent < ended:
            continue
        name = next((n for at, n in reversed(marks) if at <= sent), "before the handler")
        counts.setdefault(name, []).append(round_trip)
    spans: dict[str, float] = {}
    for (at, name), (after, _) in zip(marks, [*marks[1:], (ended, "")], strict=True):
        spans[name] = spans.get(name, 0.0) + (after - at) * 1000
    print("probes by the import's phase they were sent in (ms):")
    for name in dict.fromkeys([*counts, *spans]):
        trips = sorted(counts.get(name, []))
        p99 = trips[min(len(trips) - 1, int(0.99 * len(trips)))] if trips else 0.0
        figures = (
            f"p50 {statistics.median(trips):5.1f}, p99 {p99:5.1f},"
            f" max {trips[-1]:5.1f}; {sum(1 for trip in trips if trip > SLOW_MS)} over {SLOW_MS}"
            if trips
            else "none"
        )
        print(
            f"  {name:24s} {spans.get(name, 0.0):7.1f} ms long: {len(trips):4d} probes, {figures}"
        )
