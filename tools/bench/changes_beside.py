"""Cheap requests beside large change-stream pages: what long reads cost everyone else.

A `refimpl serve` holds --rows rows of `t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)`,
committed by /exec in transactions of 1,000 rows. --readers processes read
`GET /api/changes?table=t&format=json&wait=0&limit=<--page>` one page after another on a
keep-alive connection, each from the `next` of the one before, from the start again at the
end (the table is larger than the shared answers keep, so every page is read and encoded).
Meanwhile a prober process asks, every 10 ms, `GET /health` and a point SELECT by primary
key through /exec, alternately, each on a keep-alive connection of its own.

Printed for each tree and round: the prober's round trips (p50, p99, max, in ms) idle (no
reader) and beside the readers, the readers' rows per second, and the machine's load. With
--before, that checkout's server runs the same rounds, alternately (which goes first swaps
every round), and the medians of the rounds are printed side by side.

    python tools/bench/changes_beside.py --before ../before --rounds 3
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

import harness

TXN_ROWS = 1000
PROBE_EVERY = 0.010
_NEXT = re.compile(rb'"next":(\d+)')


def load_rows(server: harness.RefimplServer, rows: int) -> None:
    server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    for first in range(0, rows, TXN_ROWS):
        values = ", ".join(
            f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, min(first + TXN_ROWS, rows))
        )
        server.sql(f"INSERT INTO t VALUES {values}")


def reader(url: str, headers: dict[str, str], page: int, skip: int, until: float, out: Any) -> None:
    """Pages one after another (after `skip` rows first, so that readers do not read the
    same pages at once and share their answers); its rows per second into `out`."""
    client = harness.LeanHTTP(url, headers)

    def read(after: int, limit: int) -> tuple[int, int]:
        status, _, body = client.request(
            "GET", f"/api/changes?table=t&format=json&wait=0&limit={limit}&from={after}"
        )
        assert status == 200, body[:300]
        counted = body.count(b'"op":"upsert"')
        return counted, int(_NEXT.findall(body)[-1]) if counted else 0  # the end: the start

    after = read(0, skip)[1] if skip else 0
    rows = 0
    began = time.monotonic()
    while time.monotonic() < until:
        counted, after = read(after, page)
        rows += counted
    out.put(rows / (time.monotonic() - began))
    client.close()


def prober(url: str, headers: dict[str, str], rows: int, until: float, out: Any) -> None:
    health = harness.LeanHTTP(url)
    select = harness.LeanHTTP(url, headers)
    took: dict[str, list[float]] = {"health": [], "select": []}
    index = 0
    next_at = time.monotonic()
    while next_at < until:
        time.sleep(max(0.0, next_at - time.monotonic()))
        began = time.monotonic()
        if index % 2:
            status, _, _ = health.request("GET", "/health")
            took["health"].append(time.monotonic() - began)
        else:
            sql = f"SELECT * FROM t WHERE id = {index % rows}".encode()
            status, _, _ = select.request(
                "POST", "/exec", sql, headers={"Content-Type": "text/plain"}
            )
            took["select"].append(time.monotonic() - began)
        assert status == 200
        index += 1
        next_at += PROBE_EVERY
    out.put(took)


def phase(server: harness.RefimplServer, args: argparse.Namespace, readers: int) -> dict[str, Any]:
    """The prober's round trips (and the readers' rows/s) over --seconds."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    until = time.monotonic() + args.seconds
    processes = [
        context.Process(
            target=reader,
            args=(server.url, server.headers, args.page, index * args.rows // readers, until, out),
        )
        for index in range(readers)
    ]
    processes.append(
        context.Process(target=prober, args=(server.url, server.headers, args.rows, until, out))
    )
    for process in processes:
        process.start()
    got = [out.get(timeout=args.seconds + 120) for _ in processes]
    for process in processes:
        process.join()
    took = next(item for item in got if isinstance(item, dict))
    rates = [item for item in got if not isinstance(item, dict)]
    figures: dict[str, Any] = {"rows/s": sum(rates)}
    for kind, samples in took.items():
        figures[f"{kind} p50"] = 1e3 * harness.percentile(samples, 0.50)
        figures[f"{kind} p99"] = 1e3 * harness.percentile(samples, 0.99)
        figures[f"{kind} max"] = 1e3 * max(samples)
    figures["load"] = os.getloadavg()[0]
    return figures


def run_tree(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    with harness.RefimplServer(threads=16, code=code) as server:
        load_rows(server, args.rows)
        idle = phase(server, args, 0)
        loaded = phase(server, args, args.readers)
    figures = {f"idle {name}": value for name, value in idle.items() if name != "rows/s"}
    figures.update({f"beside {name}": value for name, value in loaded.items()})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--page", type=int, default=10_000)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare")
    args = parser.parse_args()
    trees = [("this", harness.REPO)]
    if args.before is not None:
        trees.append(("before", args.before.resolve()))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for round_index in range(args.rounds):
        order = trees if round_index % 2 == 0 else trees[::-1]
        for name, code in order:
            figures = run_tree(code, args)
            results[name].append(figures)
            shown = ", ".join(f"{key} {value:,.2f}" for key, value in figures.items())
            print(f"round {round_index + 1} {name}: {shown}", flush=True)
    names = list(results[trees[0][0]][0])
    rows = [
        [key, *(f"{statistics.median(r[key] for r in results[name]):,.2f}" for name, _ in trees)]
        for key in names
    ]
    harness.print_table(["medians", *(name for name, _ in trees)], rows)


if __name__ == "__main__":
    main()
