"""/api/rev under load, and what revisions save a chart's clients.

Part 1: /api/rev latency on loopback. A prober process asks GET /api/rev?table=trades&symbol=S
every 10 ms and records the round trip and the server's own handling time (the response's
`Server-Timing: app;dur=...` header): first with the server idle, then while one bulk
POST /imp of --rows rows (default 1,000,000; one request, one transaction) and a stream of
single-row INSERT commits (one every 20 ms, into the same table) run.

Part 2: a chart workload. 100 clients (25 threads in each of 4 processes), one per symbol of
100, while a writer commits 50 single-row trades per second across the symbols:

- with revisions: every 500 ms a client asks /api/rev for its symbol and re-reads its candles
  (`SELECT date_trunc('minute', time) AS m, first(price) ... WHERE symbol = 'S' GROUP BY m
  ORDER BY m` through /exec) only when the revision moved;
- without: every client re-reads its candles every 2 s.

Printed: /api/rev and SELECT requests per second, and the result cache's hits and misses
(/api/stats, per database "result_cache") over each phase: a miss is a SELECT that ran.

    python tools/bench/rev.py                   # full: 1,000,000 rows, 30 s chart phases
    python tools/bench/rev.py --quick           # 200,000 rows, 8 s chart phases
    python tools/bench/rev.py --part 1          # only /api/rev during the import
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import random
import threading
import time
from typing import Any

import harness
import requests

TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE, qty BIGINT)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(symbol)"
)
CANDLES = (
    "SELECT date_trunc('minute', time) AS m, first(price) AS open, max(price) AS high,"
    " min(price) AS low, last(price) AS close FROM trades WHERE symbol = '{symbol}'"
    " GROUP BY m ORDER BY m"
)
SYMBOLS = [f"S{i:03d}" for i in range(100)]


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def server_ms(response: requests.Response) -> float:
    timing = response.headers.get("Server-Timing", "")
    for part in timing.split(","):
        for item in part.split(";"):
            if item.strip().startswith("dur="):
                return float(item.strip()[4:])
    return float("nan")


# --- part 1 ---------------------------------------------------------------------------------


def _importer(target: dict[str, Any], rows: int, go: Any, queue: Any) -> None:
    body = harness.trades_csv(rows)
    queue.put(("ready", time.monotonic()))
    go.wait()
    began = time.monotonic()
    response = requests.post(
        target["url"] + "/imp",
        params={"table": "trades"},
        data=body,
        headers={"Authorization": f"Bearer {target['token']}", "Content-Type": "text/csv"},
        timeout=3600,
    )
    queue.put(("done", began, time.monotonic(), response.status_code, response.text[:200]))


def rev_under_import(rows: int, idle_seconds: float) -> None:
    with harness.RefimplServer(threads=32) as server:
        server.sql(TRADES)
        server.sql(f"INSERT INTO trades VALUES ('{now_text()}', 'S001', 100.0, 1)")
        target = {"url": server.url, "token": server.token}
        context = multiprocessing.get_context("fork")
        importer_queue = context.Queue()
        go = context.Event()
        importer = context.Process(target=_importer, args=(target, rows, go, importer_queue))
        importer.start()
        assert importer_queue.get(timeout=600)[0] == "ready"  # the CSV is built
        probe_queue = context.Queue()
        stop_flag = context.Value("d", time.monotonic() + 4 * 3600)
        prober = context.Process(target=_prober_until, args=(target, stop_flag, probe_queue))
        prober.start()
        time.sleep(idle_seconds)
        idle_end = time.monotonic()
        commits: list[tuple[float, float, bool]] = []
        failures: list[str] = []
        done = threading.Event()

        def committer() -> None:
            session = requests.Session()
            headers = {**server.headers, "Content-Type": "text/plain"}
            k = 0
            while not done.is_set():
                began = time.monotonic()
                sql = f"INSERT INTO trades VALUES ('{now_text()}', 'S{k % 100:03d}', 99.5, 1)"
                try:
                    answer = session.post(
                        f"{server.url}/exec", data=sql.encode(), headers=headers, timeout=120
                    )
                    ok = answer.status_code == 200
                    if not ok:
                        failures.append(f"{answer.status_code}: {answer.text[:200]}")
                except requests.RequestException as error:
                    ok = False
                    failures.append(repr(error)[:200])
                commits.append((began, (time.monotonic() - began) * 1000, ok))
                k += 1
                time.sleep(max(0.0, began + 0.02 - time.monotonic()))

        writer = threading.Thread(target=committer)
        go.set()
        writer.start()
        status = importer_queue.get(timeout=4 * 3600)
        while status[0] != "done":
            status = importer_queue.get(timeout=4 * 3600)
        _, import_began, import_ended, code, text = status
        done.set()
        writer.join()
        with stop_flag.get_lock():
            stop_flag.value = 0.0
        samples = probe_queue.get(timeout=120)
        prober.join(30)
        importer.join(30)
    if code != 200:
        print(f"warning: /imp answered {code}: {text}")
    idle = [s for s in samples if s[0] < idle_end]
    busy = [s for s in samples if import_began <= s[0] <= import_ended]
    seconds = import_ended - import_began
    rows_out = []
    for name, group in (("idle server", idle), (f"during /imp of {rows:,} rows + commits", busy)):
        rtt = harness.summary([s[1] for s in group])
        own = harness.summary([s[2] for s in group])
        rows_out.append(
            (name, rtt["n"], rtt["p50"], rtt["p99"], rtt["max"], own["p50"], own["p99"])
        )
    harness.print_table(
        ("/api/rev", "asks", "RTT p50 ms", "RTT p99 ms", "RTT max", "server p50", "server p99"),
        rows_out,
        title="part 1: /api/rev latency (server = Server-Timing app;dur, the handling time)",
    )
    during = [c for c in commits if c[0] <= import_ended]
    lat = harness.summary([c[1] for c in during if c[2]])
    failed = sum(1 for c in during if not c[2])
    print(
        f"/imp of {rows:,} rows took {seconds:.1f} s ({rows / seconds:,.0f} rows/s);"
        f" single-row commits meanwhile: {lat['n']} done (p50 {lat['p50']:.0f} ms,"
        f" max {lat['max']:.0f} ms), {failed} failed"
    )
    for failure in sorted(set(failures)):
        print(f"  a failed commit: {failure}")
    print()


def _prober_until(target: dict[str, Any], stop_flag: Any, queue: Any) -> None:
    """_prober until the parent sets stop_flag to 0."""
    session = requests.Session()
    headers = {"Authorization": f"Bearer {target['token']}"}
    url = target["url"] + "/api/rev"
    samples = []
    while time.monotonic() < stop_flag.value:
        began = time.monotonic()
        try:
            response = session.get(
                url, params={"table": "trades", "symbol": "S001"}, headers=headers, timeout=60
            )
            if response.status_code == 200:
                samples.append((began, (time.monotonic() - began) * 1000, server_ms(response)))
        except requests.RequestException:
            pass
        time.sleep(max(0.0, began + 0.01 - time.monotonic()))
    queue.put(samples)


# --- part 2 ---------------------------------------------------------------------------------


def _chart_client(
    target: dict[str, Any], symbol: str, mode: str, start_at: float, stop_at: float, out: list[Any]
) -> None:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {target['token']}"}
    revs = selects = errors = 0
    last_rev = None
    sql = CANDLES.format(symbol=symbol)
    period = 0.5 if mode == "rev" else 2.0
    rng = random.Random(symbol)
    next_at = start_at + rng.random() * period  # clients spread over the period
    while True:
        time.sleep(max(0.0, next_at - time.monotonic()))
        if time.monotonic() >= stop_at:
            break
        next_at += period
        try:
            read = True
            if mode == "rev":
                response = session.get(
                    target["url"] + "/api/rev",
                    params={"table": "trades", "symbol": symbol},
                    headers=headers,
                    timeout=30,
                )
                revs += 1
                rev = response.json()["revs"][symbol]
                read = rev != last_rev
                last_rev = rev
            if read:
                response = session.get(
                    target["url"] + "/exec", params={"query": sql}, headers=headers, timeout=30
                )
                selects += 1
                if response.status_code != 200:
                    errors += 1
        except (requests.RequestException, ValueError, KeyError):
            errors += 1
    out.append((revs, selects, errors))


def _chart_process(
    target: dict[str, Any], symbols: list[str], mode: str, start_at: float, stop_at: float
) -> tuple[int, int, int]:
    out: list[Any] = []
    threads = [
        threading.Thread(target=_chart_client, args=(target, s, mode, start_at, stop_at, out))
        for s in symbols
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tuple(sum(o[i] for o in out) for i in range(3))  # type: ignore[return-value]


def chart_phase(
    server: harness.RefimplServer, mode: str, seconds: float, trades_per_second: float
) -> dict[str, float]:
    target = {"url": server.url, "token": server.token}
    procs = 4
    groups = [SYMBOLS[p::procs] for p in range(procs)]
    before = server.stats()["databases"]["demo"]["result_cache"]
    done = threading.Event()
    trades = [0]

    def trader() -> None:
        session = requests.Session()
        headers = {**server.headers, "Content-Type": "text/plain"}
        rng = random.Random(7)
        time.sleep(max(0.0, start_at - time.monotonic()))
        began = time.monotonic()
        while not done.is_set() and time.monotonic() < stop_at:
            symbol = rng.choice(SYMBOLS)
            sql = (
                f"INSERT INTO trades VALUES ('{now_text()}', '{symbol}',"
                f" {100 + rng.random():.3f}, {rng.randint(1, 50)})"
            )
            session.post(f"{server.url}/exec", data=sql.encode(), headers=headers, timeout=60)
            trades[0] += 1
            time.sleep(max(0.0, began + trades[0] / trades_per_second - time.monotonic()))

    context = multiprocessing.get_context("fork")
    start_at = time.monotonic() + 1.5
    stop_at = start_at + seconds
    with context.Pool(procs) as pool:
        pending = pool.starmap_async(
            _chart_process, [(target, g, mode, start_at, stop_at) for g in groups]
        )
        writer = threading.Thread(target=trader)
        writer.start()
        results = pending.get(timeout=seconds + 300)
        done.set()
        writer.join()
    after = server.stats()["databases"]["demo"]["result_cache"]
    hits = after["hits"] - before["hits"]
    misses = after["misses"] - before["misses"]
    return {
        "revs": sum(r[0] for r in results) / seconds,
        "selects": sum(r[1] for r in results) / seconds,
        "errors": sum(r[2] for r in results),
        "hits": hits / seconds,
        "misses": misses / seconds,
        "hit_rate": hits / (hits + misses) if hits + misses else float("nan"),
        "trades": trades[0] / seconds,
    }


def chart(seconds: float, history: int) -> None:
    with harness.RefimplServer(threads=64) as server:
        server.sql(TRADES)
        base = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
        lines = ["time,symbol,price,qty\n"]
        for k in range(history):
            for i, symbol in enumerate(SYMBOLS):
                stamp = base + datetime.timedelta(seconds=k * 3600 / history, microseconds=i)
                lines.append(f"{stamp:%Y-%m-%dT%H:%M:%S.%fZ},{symbol},{100 + k % 7},1\n")
        server.import_csv("trades", "".join(lines))
        with_revs = chart_phase(server, "rev", seconds, 50)
        polling = chart_phase(server, "poll", seconds, 50)
    rows = []
    for name, f in (
        ("rev every 500 ms, re-read on change", with_revs),
        ("re-read every 2 s, no revisions", polling),
    ):
        rows.append(
            (
                name,
                f["trades"],
                f["revs"],
                f["selects"],
                f["misses"],
                f["hits"],
                f["hit_rate"] * 100,
                f["errors"],
            )
        )
    harness.print_table(
        (
            "100 chart clients",
            "trades/s",
            "rev/s",
            "SELECT/s",
            "ran/s",
            "cached/s",
            "hit %",
            "errors",
        ),
        rows,
        title=f"part 2: chart workload, {seconds:g} s per phase, {history} trades per symbol"
        " before; ran/cached = result cache misses/hits (/api/stats)",
    )
    harness.print_checks(
        [
            harness.Check(
                "SELECTs sent with revisions / without", with_revs["selects"] / polling["selects"]
            ),
            harness.Check(
                "SELECTs run (cache misses) with revisions / without",
                with_revs["misses"] / polling["misses"],
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the bulk /imp")
    parser.add_argument("--seconds", type=float, default=30.0, help="per chart phase")
    parser.add_argument("--history", type=int, default=300, help="trades per symbol before")
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 8 s chart phases")
    parser.add_argument("--part", type=int, choices=(1, 2), help="run only this part")
    args = parser.parse_args()
    rows = 200_000 if args.quick else args.rows
    seconds = 8.0 if args.quick else args.seconds
    if args.part != 2:
        rev_under_import(rows, idle_seconds=2.0)
    if args.part != 1:
        chart(seconds, args.history)


if __name__ == "__main__":
    main()
