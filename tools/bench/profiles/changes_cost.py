"""Server CPU per `/api/changes` page, two checkouts side by side (issue 37).

Each checkout (`--old`, `--new`: folders holding a `refimpl` package) gets a server of its
own with the same rows (`t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)`, --rows rows in
commits of 100). In each round, every page size and format is measured through each server,
the order of the two swapped every round: walks through the table in pages for --seconds,
by one keep-alive client (`harness.LeanHTTP`: a few tens of microseconds a request, so the
figures are the server's). Before each walk a one-row commit to another table moves the
durable LSN, so no page is answered from the shared answers of an earlier walk.

With --fixed, each round also reads one page of 100 rows again and again (the same
request, answered from the shared answers after the first: the request's fixed part alone,
framing, dispatch, token, plan, log line).

Printed: per page size and format, the median over the rounds of the server's CPU per
page (utime + stime of its process over the walk), for each checkout, their ratio new/old,
and the load average beside each round.

    python tools/bench/profiles/changes_cost.py --old ../base --new . --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402


def load(server: harness.RefimplServer, rows: int) -> None:
    """The table's rows in commits of 100, and the table the walks' commits go to."""
    server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    server.sql("CREATE TABLE tick (id BIGINT PRIMARY KEY)")
    for first in range(0, rows, 100):
        values = (f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, first + 100))
        server.sql("INSERT INTO t VALUES " + ", ".join(values))


def walk(server: harness.RefimplServer, lean: harness.LeanHTTP, fmt: str, page: int) -> int:
    """One walk through the table in pages; how many pages."""
    server.sql(f"INSERT INTO tick VALUES ({time.monotonic_ns()})")
    after, pages = 0, 0
    while True:
        target = f"/api/changes?table=t&format={fmt}&wait=0&limit={page}&from={after}"
        status, headers, body = lean.request("GET", target)
        assert status == 200, body
        pages += 1
        if fmt == "json":
            marker = body.rindex(b'"next":')
            end = body.index(b",", marker)
            after = int(body[marker + 7 : end])
            if b'"more":true' not in body[end:]:
                break
        else:
            position = body.rindex(b"event: position")
            after = int(body[body.rindex(b"id: ", 0, position) + 4 : position].strip())
            if b'"more":true' not in body[position:]:
                break
    return pages


def measure(
    server: harness.RefimplServer, lean: harness.LeanHTTP, fmt: str, page: int, seconds: float
) -> tuple[float, float]:
    """Server CPU seconds per page over walks for at least `seconds` (the CPU clock's tick
    is 10 ms: a long enough measure makes it small), and the walks' wall seconds per page."""
    pages, cpu, began = 0, harness.cpu_seconds(server.pid), time.monotonic()
    while time.monotonic() - began < seconds:
        pages += walk(server, lean, fmt, page)
    wall = time.monotonic() - began
    return (harness.cpu_seconds(server.pid) - cpu) / pages, wall / pages


def fixed(
    server: harness.RefimplServer, lean: harness.LeanHTTP, seconds: float
) -> tuple[float, float]:
    """Server CPU seconds per request of one same page asked again for `seconds`, and wall
    seconds per request."""
    target = "/api/changes?table=t&format=json&wait=0&limit=100&from=0"
    requests, cpu, began = 0, harness.cpu_seconds(server.pid), time.monotonic()
    while time.monotonic() - began < seconds:
        status, _, body = lean.request("GET", target)
        assert status == 200, body
        requests += 1
    wall = time.monotonic() - began
    return (harness.cpu_seconds(server.pid) - cpu) / requests, wall / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", default="100,1000")
    parser.add_argument("--formats", default="json,sse")
    parser.add_argument("--seconds", type=float, default=1.5, help="per measure")
    parser.add_argument("--fixed", action="store_true", help="also the same page again")
    args = parser.parse_args()
    pages = [int(p) for p in args.pages.split(",")]
    formats = args.formats.split(",")
    servers = {
        "old": harness.RefimplServer(threads=16, code=args.old),
        "new": harness.RefimplServer(threads=16, code=args.new),
    }
    figures: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    with servers["old"], servers["new"]:
        clients = {}
        for name, server in servers.items():
            load(server, args.rows)
            clients[name] = harness.LeanHTTP(server.url, server.headers)
            for fmt in formats:
                walk(server, clients[name], fmt, pages[0])  # warm
        for index in range(args.rounds):
            order = ["old", "new"] if index % 2 == 0 else ["new", "old"]
            if args.fixed:
                for name in order:
                    cost = fixed(servers[name], clients[name], args.seconds)
                    figures.setdefault((name, "fixed", 100), []).append(cost)
            for fmt in formats:
                for page in pages:
                    for name in order:
                        cost = measure(servers[name], clients[name], fmt, page, args.seconds)
                        figures.setdefault((name, fmt, page), []).append(cost)
            print(f"round {index + 1}, load average {os.getloadavg()[0]:.2f}", flush=True)
    print(
        f"{args.rows:,} rows; medians of {args.rounds} rounds; server CPU ms per page (cpu),"
        " the client's wall ms per page (wall)"
    )
    print(
        f"{'format':6} {'limit':>6} {'old cpu':>8} {'new cpu':>8} {'new/old':>8}"
        f" {'old wall':>8} {'new wall':>8} {'new/old':>8}"
    )
    rows = [(fmt, page) for fmt in formats for page in pages]
    for fmt, page in [("fixed", 100)] * args.fixed + rows:
        cells = []
        for part in (0, 1):
            old = statistics.median(f[part] for f in figures[("old", fmt, page)]) * 1000
            new = statistics.median(f[part] for f in figures[("new", fmt, page)]) * 1000
            cells.append(f"{old:8.3f} {new:8.3f} {new / old:8.2f}")
        print(f"{fmt:6} {page:>6} {cells[0]} {cells[1]}")


if __name__ == "__main__":
    main()
