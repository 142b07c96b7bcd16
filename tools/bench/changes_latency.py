"""Commit-to-event latency of /api/changes (SSE) against PostgreSQL LISTEN/NOTIFY, in one run.

A writer commits single-row INSERTs into `c (id, sent)` one at a time, every --interval
seconds, `sent` being the writer's clock (CLOCK_MONOTONIC, shared by all processes) taken just
before the request. Readers wait on the change stream; a reader's latency for a commit is its
clock when it parses the change minus the row's `sent`.

- refimpl: `refimpl serve --threads 512` (a quarter of the threads may wait: 128). Each reader
  asks GET /api/changes?table=c (SSE) with `Last-Event-ID` over a keep-alive connection
  (`harness.LeanHTTP`: `requests` would cost the readers' processes more CPU than the server
  spends on them, on the same two cores), and asks again from the id it got (long polling).
  The writer commits through the same client.
  A change's latency is taken when its answer has arrived whole.
- PostgreSQL: an AFTER INSERT trigger calls pg_notify('c', id || ',' || sent); each listener
  is a psycopg connection that ran LISTEN c.

With 1 and with 100 readers (listeners), spread over up to 4 processes of threads. Then
1,000 readers against `--threads 64` (16 may wait): how many wait, how many are answered
at once with nothing (they then follow the answer's `retry:` hint, as an EventSource would),
and the latency they see.

Targets: p99 under 20 ms with 100 readers, and no worse than 2x PostgreSQL's p99.

    python tools/bench/changes_latency.py               # full: 100 commits per phase, ~3 min
    python tools/bench/changes_latency.py --quick       # 20 commits per phase
"""

from __future__ import annotations

import argparse
import multiprocessing
import threading
import time
from typing import Any

import harness
import msgspec
import psycopg
import requests
from stream_throughput import writer

WAIT_MS = 2000
# The readers share the machine with the server; msgspec parses an event in a third of
# the json module's time, as psycopg's listeners get theirs parsed in C.
_decode = msgspec.json.Decoder().decode
SETTLE = 2.0


# --- readers (in forked processes) ----------------------------------------------------------


def _sse_reader(target: dict[str, Any], start: str, stop_at: float, out: list[Any]) -> None:
    client = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    path = f"/api/changes?table=c&wait={WAIT_MS}"
    last = start
    events: list[tuple[int, float]] = []
    asks: list[tuple[float, float, str]] = []
    while time.monotonic() < stop_at:
        began = time.monotonic()
        retry_ms = 0
        found = False
        try:
            status, _, body = client.request("GET", path, headers={"Last-Event-ID": last})
            if status != 200:
                raise ValueError(f"status {status}")
            now = time.monotonic()
            event = ""
            for line in body.decode("utf-8").split("\n"):
                if line.startswith("data: ") and event == "change":
                    row = _decode(line[6:])["row"]
                    if row is not None:
                        events.append((row["id"], now - row["sent"]))
                        found = True
                elif line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("id: "):
                    last = line[4:]
                elif line.startswith("retry: "):
                    retry_ms = int(line[7:])
        except (OSError, EOFError, ValueError):
            asks.append((began, time.monotonic(), "error"))
            client.close()
            time.sleep(0.1)
            continue
        ended = time.monotonic()
        if found:
            kind = "change"
        elif ended - began >= WAIT_MS / 1000 * 0.75:
            kind = "waited"
        else:
            kind = "empty"  # answered at once with nothing: no wait slot was free
            time.sleep(min(retry_ms / 1000, max(0.0, stop_at - time.monotonic())))
        asks.append((began, ended, kind))
    client.close()
    out.append((events, asks))


def _pg_listener(target: dict[str, Any], ready: Any, stop_at: float, out: list[Any]) -> None:
    connection = psycopg.connect(target["conninfo"], autocommit=True)
    connection.execute("LISTEN c")
    with ready.get_lock():
        ready.value += 1
    events: list[tuple[int, float]] = []
    while True:
        remaining = stop_at - time.monotonic()
        if remaining <= 0:
            break
        for notify in connection.notifies(timeout=remaining):
            now = time.monotonic()
            ident, sent = notify.payload.split(",")
            events.append((int(ident), now - float(sent)))
    connection.close()
    out.append((events, []))


def reader_process(
    target: dict[str, Any], count: int, start: str, ready: Any, stop_at: float, results: Any
) -> None:
    out: list[Any] = []
    if target["kind"] == "refimpl":
        threads = [
            threading.Thread(target=_sse_reader, args=(target, start, stop_at, out))
            for _ in range(count)
        ]
    else:
        threads = [
            threading.Thread(target=_pg_listener, args=(target, ready, stop_at, out))
            for _ in range(count)
        ]
    for thread in threads:
        thread.start()
    if target["kind"] == "refimpl":
        with ready.get_lock():
            ready.value += count
    for thread in threads:
        thread.join()
    results.put(([e for events, _ in out for e in events], [a for _, asks in out for a in asks]))


# --- writers --------------------------------------------------------------------------------


def run_phase(
    target: dict[str, Any],
    readers: int,
    commits: int,
    interval: float,
    first_id: int,
    procs: int = 4,
) -> dict[str, Any]:
    """Readers wait, the writer commits; latency figures and the readers' requests."""
    start = "0"
    if target["kind"] == "refimpl":
        stats = requests.get(
            target["url"] + "/api/stats",
            headers={"Authorization": f"Bearer {target['token']}"},
            timeout=30,
        )
        start = str(stats.json()["databases"]["demo"]["durable_lsn"])
    groups = [len(range(p, readers, procs)) for p in range(min(procs, readers))]
    context = multiprocessing.get_context("fork")
    ready = context.Value("i", 0)
    run_for = SETTLE + commits * interval + 3.0
    stop_at = time.monotonic() + run_for + 5.0
    commit = writer(target)
    queue = context.Queue()
    processes = [
        context.Process(target=reader_process, args=(target, count, start, ready, stop_at, queue))
        for count in groups
    ]
    for process in processes:
        process.start()
    waited_until = time.monotonic() + 60
    while ready.value < readers and time.monotonic() < waited_until:
        time.sleep(0.05)
    time.sleep(SETTLE)  # every reader has asked and waits
    began = time.monotonic()
    sent_times = []
    for k in range(commits):
        sent_times.append(commit(first_id + k))
        time.sleep(max(0.0, began + (k + 1) * interval - time.monotonic()))
    results = [queue.get(timeout=run_for + 120) for _ in processes]
    for process in processes:
        process.join(30)
    events = [e for r, _ in results for e in r]
    asks = [a for _, r in results for a in r]
    latencies = [lat * 1000 for ident, lat in events if first_id <= ident < first_id + commits]
    figures = harness.summary(latencies)
    figures["expected"] = readers * commits
    figures["asks"] = asks
    figures["sent"] = sent_times
    figures["events"] = events
    return figures


def in_flight(asks: list[tuple[float, float, str]], moments: list[float]) -> dict[str, float]:
    """Median over the commit moments of the readers' requests open then, by outcome."""
    counts: dict[str, list[int]] = {"change": [], "waited": [], "empty": [], "error": []}
    for moment in moments:
        for kind, values in counts.items():
            values.append(sum(1 for a, b, k in asks if k == kind and a < moment < b))
    return {kind: float(sorted(v)[len(v) // 2]) if v else 0.0 for kind, v in counts.items()}


# --- main -----------------------------------------------------------------------------------


def prepare_postgres(pg: harness.Postgres) -> dict[str, Any]:
    harness.notify_table(pg)
    return {"kind": "pg", "conninfo": pg.conninfo}


def refimpl_target(server: harness.RefimplServer) -> dict[str, Any]:
    server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
    return {"kind": "refimpl", "url": server.url, "token": server.token}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=100, help="commits per phase")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between commits")
    parser.add_argument("--crowd", type=int, default=1000, help="readers of the last part")
    parser.add_argument("--quick", action="store_true", help="20 commits per phase")
    args = parser.parse_args()
    commits = 20 if args.quick else args.commits

    rows = []
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with harness.RefimplServer(threads=512) as server:
        target = refimpl_target(server)
        for n, readers in enumerate((1, 100)):
            results[("refimpl", readers)] = run_phase(
                target, readers, commits, args.interval, n * 1_000_000
            )
    with harness.Postgres({"max_connections": "300"}) as pg:
        target = prepare_postgres(pg)
        for n, readers in enumerate((1, 100)):
            results[("pg", readers)] = run_phase(
                target, readers, commits, args.interval, n * 1_000_000
            )
    for readers in (1, 100):
        for system in ("refimpl", "pg"):
            f = results[(system, readers)]
            name = "refimpl /api/changes" if system == "refimpl" else "PostgreSQL NOTIFY"
            rows.append(
                (
                    f"{name}, {readers} reader(s)",
                    f["n"],
                    f["expected"],
                    f["p50"],
                    f["p99"],
                    f["max"],
                )
            )
    harness.print_table(
        ("workload", "events", "expected", "p50 ms", "p99 ms", "max ms"),
        rows,
        title=f"commit-to-event latency, {commits} commits every {args.interval * 1000:g} ms"
        " (refimpl: /api/changes SSE, --threads 512; PostgreSQL: LISTEN/NOTIFY)",
    )
    ours, theirs = results[("refimpl", 100)]["p99"], results[("pg", 100)]["p99"]
    harness.print_checks(
        [
            harness.Check("100 readers: refimpl p99 (ms)", ours, "< 20 ms", ours < 20),
            harness.Check(
                "100 readers: refimpl p99 / PostgreSQL p99",
                ours / theirs,
                "<= 2x",
                ours <= 2 * theirs,
                ours=ours,
                peer=theirs,
            ),
        ]
    )

    crowd_commits = max(5, commits // 4)
    with harness.RefimplServer(threads=64) as server:
        target = refimpl_target(server)
        started = time.monotonic()
        crowd = run_phase(target, args.crowd, crowd_commits, 1.0, 0)
        elapsed = time.monotonic() - started
    asks = crowd["asks"]
    kinds = {k: sum(1 for a in asks if a[2] == k) for k in ("change", "waited", "empty", "error")}
    open_then = in_flight(asks, crowd["sent"])
    print(
        f"{args.crowd} readers, --threads 64 (a quarter, 16, may wait), {crowd_commits}"
        " commits 1 s apart:"
    )
    print(f"  requests answered: {len(asks):,} in {elapsed:.1f} s ({len(asks) / elapsed:,.0f}/s)")
    print(
        f"  with a change: {kinds['change']:,}; empty after a full wait: {kinds['waited']:,};"
        f" empty at once (no wait slot, retry after 1 s): {kinds['empty']:,};"
        f" failed: {kinds['error']:,}"
    )
    print(
        f"  at a commit (median over the commits), requests open: {open_then['change']:.0f}"
        f" that the commit answers (waiting, or queued in the server), {open_then['empty']:.0f}"
        f" that end empty at once (queued, refused a wait slot)"
    )
    print(
        f"  events {crowd['n']:,} of {crowd['expected']:,} expected; latency p50"
        f" {crowd['p50']:.1f} ms, p99 {crowd['p99']:.1f} ms, max {crowd['max']:.1f} ms"
    )


if __name__ == "__main__":
    main()
