"""Ordered top-N live queries (spec: subscribe, offsets): commit-to-answer latency and server
CPU per commit, for a window in the table's order at two table sizes.

Table `quotes (id BIGINT PRIMARY KEY, sent DOUBLE)` of --rows rows (ids 1,000,000 and up,
loaded through /imp), and one subscription

    SUBSCRIBE SELECT id, sent FROM quotes ORDER BY id LIMIT 10      (&offsets=true)

held by a waiter that always has a request waiting (asked again with the id of the last
answer, over a keep-alive connection of `harness.LeanHTTP`). A writer makes single-row
commits at --rate a second through /exec: one in ten inserts an id below every other (it
enters the window at offset 0 and pushes the last row out), the others an id above every
other (they wake the subscription, whose re-run finds the same window). `sent` is the
writer's clock (CLOCK_MONOTONIC) just before the request: a move's latency is the waiter's
clock when it has parsed the answer minus the entering row's `sent`. Server CPU per commit
is the server process's utime+stime (/proc/<pid>/stat) over the commits, divided by their
number: the INSERT, the wake-up, the re-run, the answer and the waiter's next request.
"commit p50/p99" is the writer's own round trip (answered once the commit is durable, which a
live query's answer waits for too); "after ack" is, per entering commit, its answer's latency
minus that commit's own round trip: what the live query adds to the durable commit (negative
when the answer arrives before the writer's acknowledgement).

Shown for 10,000 and --big rows (default 1,000,000; --quick 100,000). The same run with the
window ordered by an expression the table keeps no order of (`ORDER BY id + 0`: the same
window, but a full re-run per commit, as the spec says) is shown at 10,000 rows beside it.

    python tools/bench/top_n.py              # full: 1,000 commits per phase (100 moves)
    python tools/bench/top_n.py --quick      # 300 commits, 100,000 rows
"""

from __future__ import annotations

import argparse
import threading
import time
from urllib.parse import quote

import harness
from subscribe_waiters import parse_event

WINDOW = 10
TOP_BY_KEY = f"SUBSCRIBE SELECT id, sent FROM quotes ORDER BY id LIMIT {WINDOW}"
TOP_BY_VALUE = f"SUBSCRIBE SELECT id, sent FROM quotes ORDER BY id + 0 LIMIT {WINDOW}"
FIRST_ID = 1_000_000


def load(server: harness.RefimplServer, rows: int, chunk: int = 200_000) -> None:
    server.sql("CREATE TABLE quotes (id BIGINT PRIMARY KEY, sent DOUBLE)")
    for start in range(0, rows, chunk):
        ids = range(FIRST_ID + start, FIRST_ID + min(rows, start + chunk))
        server.import_csv("quotes", "id,sent\n" + "".join(f"{i},0\n" for i in ids))


def _waiter(
    server: harness.RefimplServer,
    query: str,
    stop: threading.Event,
    ready: threading.Event,
    samples: dict[float, float],
    errors: list[str],
) -> None:
    """Answers until `stop`; `samples`: each entering row's `sent` -> the latency (ms) of
    the first answer that moved it in."""
    client = harness.LeanHTTP(server.url, server.headers)
    target = f"/api/subscribe?query={quote(query)}&offsets=true"
    status, _, body = client.request("GET", target + "&wait=0")
    ident = parse_event(body.decode())[0]
    ready.set()
    while not stop.is_set():
        status, _, body = client.request("GET", f"{target}&id={quote(ident)}&wait=5000")
        now = time.monotonic()
        if status != 200:
            errors.append(f"{status}: {body[:200]!r}")
            break
        ident, kind, data = parse_event(body.decode())
        if kind == "rows" and data:
            for move in data["moves"]:
                sent = move["row"][1]
                if move["new_offset"] is not None and sent > 0:
                    samples.setdefault(sent, (now - sent) * 1000)
    client.close()


def phase(rows: int, query: str, commits: int, rate: float) -> dict[str, float]:
    with harness.RefimplServer(threads=32) as server:
        began = time.monotonic()
        load(server, rows)
        loaded = time.monotonic() - began
        stop, ready = threading.Event(), threading.Event()
        samples: dict[float, float] = {}
        errors: list[str] = []
        waiter = threading.Thread(
            target=_waiter, args=(server, query, stop, ready, samples, errors)
        )
        waiter.start()
        ready.wait(120)
        time.sleep(1.0)
        writer = harness.LeanHTTP(server.url, server.headers)
        low, high = FIRST_ID - 1, FIRST_ID + rows
        commit_ms: dict[float, float] = {}  # by the row's `sent`
        cpu_before = harness.cpu_seconds(server.pid)
        started = time.monotonic()
        for k in range(commits):
            if k % 10 == 0:
                ident, low = low, low - 1
            else:
                ident, high = high, high + 1
            sent = time.monotonic()
            body = f"INSERT INTO quotes VALUES ({ident}, {sent!r})".encode()
            status, _, answer = writer.request("POST", "/exec", body)
            commit_ms[sent] = (time.monotonic() - sent) * 1000
            assert status == 200, answer
            time.sleep(max(0.0, started + (k + 1) / rate - time.monotonic()))
        time.sleep(0.5)
        cpu = harness.cpu_seconds(server.pid) - cpu_before
        stop.set()
        writer.request("POST", "/exec", f"INSERT INTO quotes VALUES ({low}, 0)".encode())
        waiter.join(30)
        writer.close()
    figures = harness.summary(list(samples.values()))
    after = harness.summary(
        [lat - commit_ms[sent] for sent, lat in samples.items() if sent in commit_ms]
    )
    figures["after_ack_p50"], figures["after_ack_p99"] = after["p50"], after["p99"]
    figures["expected"] = len(range(0, commits, 10))
    figures["cpu_ms"] = cpu / commits * 1000
    figures["loaded_s"] = loaded
    figures["errors"] = len(errors)
    figures["commit_p50"] = harness.percentile(list(commit_ms.values()), 0.5)
    figures["commit_p99"] = harness.percentile(list(commit_ms.values()), 0.99)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=1000, help="commits per phase")
    parser.add_argument("--rate", type=float, default=100.0, help="commits a second")
    parser.add_argument("--big", type=int, default=1_000_000, help="rows of the big table")
    parser.add_argument("--quick", action="store_true", help="300 commits, 100,000 rows")
    args = parser.parse_args()
    commits = 300 if args.quick else args.commits
    big = 100_000 if args.quick else args.big
    runs = [
        ("ORDER BY id (the key)", 10_000, TOP_BY_KEY),
        ("ORDER BY id (the key)", big, TOP_BY_KEY),
        ("ORDER BY id + 0 (no order kept)", 10_000, TOP_BY_VALUE),
    ]
    table, checks = [], []
    by_size: dict[int, dict[str, float]] = {}
    for name, rows, query in runs:
        f = phase(rows, query, commits, args.rate)
        table.append(
            (
                name,
                rows,
                f["n"],
                f["expected"],
                f["commit_p50"],
                f["commit_p99"],
                f["p50"],
                f["p99"],
                f["max"],
                f["after_ack_p50"],
                f["after_ack_p99"],
                f["cpu_ms"],
                f["errors"],
            )
        )
        if query == TOP_BY_KEY:
            by_size[rows] = f
    harness.print_table(
        (
            "window",
            "rows",
            "moves",
            "expected",
            "commit p50 ms",
            "commit p99 ms",
            "p50 ms",
            "p99 ms",
            "max ms",
            "after ack p50",
            "after ack p99",
            "CPU ms/commit",
            "errors",
        ),
        table,
        title=f"top-{WINDOW} subscription with offsets, {commits} single-row commits at"
        f" {args.rate:g}/s, one in ten entering the window",
    )
    small, large = by_size[10_000], by_size[big]
    checks.append(
        harness.Check(
            f"commit-to-answer p99, {big:,} rows (ms)", large["p99"], "< 10 ms", large["p99"] < 10
        )
    )
    growth = large["cpu_ms"] / max(small["cpu_ms"], 1e-9)
    checks.append(
        harness.Check(
            f"CPU per commit, {big:,} rows / 10,000 rows", growth, "flat (< 1.5)", growth < 1.5
        )
    )
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
