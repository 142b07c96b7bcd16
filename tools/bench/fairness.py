"""Fairness: does a cheap request still get through while clients send costly statements?

A table of --rows rows (default 1,000,000; loaded with POST /imp in chunks of 100,000), then
a prober process asks, every 10 ms, `GET /health` and a point SELECT by the whole primary key,
alternately: first on the idle server, then while 8 client processes send costly statements
that stay within the limits (each within `statement_timeout_ms` and `max_sql_bytes`), one
after another without pause:

- a full scan with a LIKE:   SELECT count(*) FROM big WHERE name LIKE '%7%3%'
- a sort of all of it:       SELECT id, name FROM big ORDER BY name DESC, v LIMIT 10
- a 1 MB statement:          SELECT count(*) FROM big WHERE name IN (<10,000 names, ~1 MB>),
                             and INSERT INTO side VALUES <~1 MB of rows>, in turn
- a wide GROUP BY:           SELECT id % 100000 AS g, count(*), sum(v), min(name) ... GROUP BY g

Printed: the prober's round trips (p50, p99, max) for each kind of probe, idle and loaded,
with the target p99 under 100 ms while loaded; and what the costly clients got (statements,
statuses, seconds per statement).

    python tools/bench/fairness.py                 # 1,000,000 rows, 30 s of load
    python tools/bench/fairness.py --quick         # 100,000 rows, 15 s of load
    python tools/bench/fairness.py --rows 300000 --seconds 20
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import Counter
from typing import Any

import harness

CHUNK_ROWS = 100_000
PROBE_EVERY = 0.010
TARGET_P99_MS = 100.0
CLIENTS = 8
IN_ITEMS = 10_000  # the most items an IN list may have
BIG = "CREATE TABLE big (id INT PRIMARY KEY, ts TIMESTAMP, sym SYMBOL, name STRING, v DOUBLE)"
SIDE = "CREATE TABLE side (id INT, name STRING)"
POINT = "SELECT * FROM big WHERE id = {id}"


def load(server: harness.RefimplServer, rows: int) -> float:
    """The table, by /imp in chunks; seconds taken."""
    server.sql(BIG)
    server.sql(SIDE)
    http = harness.LeanHTTP(server.url, server.headers)
    began = time.monotonic()
    for start in range(0, rows, CHUNK_ROWS):
        lines = ["id,ts,sym,name,v\n"]
        for i in range(start, min(rows, start + CHUNK_ROWS)):
            lines.append(
                f"{i},2026-01-{1 + i % 28:02d}T00:00:{i % 60:02d}Z,S{i % 50},"
                f"name-{i * 7919 % 1_000_003},{i % 997 * 0.5}\n"
            )
        status, _, body = http.request(
            "POST", "/imp?table=big", "".join(lines).encode(), {"Content-Type": "text/csv"}
        )
        if status != 200:
            raise RuntimeError(f"/imp answered {status}: {body[:300]!r}")
    http.close()
    return time.monotonic() - began


def costly_statements(rows: int, max_sql_bytes: int) -> list[tuple[str, str]]:
    """(kind, SQL) of the costly statements, each just within the SQL size limit."""
    budget = max_sql_bytes - 1024
    # At most IN_ITEMS items (the server's limit on an IN list), long ones to fill the bytes.
    width = max(1, budget // IN_ITEMS - 8)  # less the quotes, the comma and "name-"
    in_items = [f"'name-{i * 7919 % 1_000_003:<{width}}'" for i in range(IN_ITEMS)]
    rows_text, size, i = [], 0, 0
    while size < budget - 64:
        row = f"({i}, 'v{i}')"
        rows_text.append(row)
        size += len(row) + 1
        i += 1
    return [
        ("LIKE scan", "SELECT count(*) FROM big WHERE name LIKE '%7%3%'"),
        ("sort", "SELECT id, name FROM big ORDER BY name DESC, v LIMIT 10"),
        ("1 MB IN list", "SELECT count(*) FROM big WHERE name IN (" + ",".join(in_items) + ")"),
        (
            "wide GROUP BY",
            "SELECT id % 100000 AS g, count(*), sum(v), min(name) FROM big GROUP BY g",
        ),
        ("1 MB of VALUES", "INSERT INTO side VALUES " + ",".join(rows_text)),
    ]


def _client(
    target: dict[str, Any], number: int, statements: list[tuple[str, str]], until: float, queue: Any
) -> None:
    """Costly statements one after another until `until`; (kind, status, seconds) each."""
    http = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    done = []
    k = number
    while time.monotonic() < until:
        kind, sql = statements[k % len(statements)]
        k += 1
        began = time.monotonic()
        try:
            status, _, _ = http.request("POST", "/exec", sql.encode())
        except (OSError, EOFError, ValueError):
            status = 0
            http.close()
        done.append((kind, status, time.monotonic() - began))
    queue.put(("client", done))


def _prober(target: dict[str, Any], rows: int, until: float, queue: Any) -> None:
    """Every 10 ms, /health and a point SELECT in turn: (kind, ms, status) each."""
    http = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    samples = []
    k = 0
    next_at = time.monotonic()
    while time.monotonic() < until:
        if k % 2 == 0:
            kind, method, path, body = "/health", "GET", "/health", b""
        else:
            kind, method, path = "point SELECT", "POST", "/exec"
            body = POINT.format(id=k * 7919 % max(rows, 1)).encode()
        began = time.monotonic()
        try:
            status, _, _ = http.request(method, path, body)
        except (OSError, EOFError, ValueError):
            status = 0
            http.close()
        samples.append((kind, (time.monotonic() - began) * 1000, status))
        k += 1
        next_at += PROBE_EVERY
        time.sleep(max(0.0, next_at - time.monotonic()))
    queue.put(("prober", samples))


def probe(
    context: Any,
    target: dict[str, Any],
    rows: int,
    seconds: float,
    statements: list[tuple[str, str]] | None,
) -> tuple[list, list]:
    """The prober for `seconds`, beside CLIENTS costly clients when `statements` are given."""
    queue = context.Queue()
    until = time.monotonic() + seconds
    processes = [context.Process(target=_prober, args=(target, rows, until, queue))]
    for number in range(CLIENTS if statements else 0):
        processes.append(
            context.Process(target=_client, args=(target, number, statements, until, queue))
        )
    for process in processes:
        process.start()
    samples, costly = [], []
    for _ in processes:
        who, items = queue.get(timeout=seconds + 600)
        (samples if who == "prober" else costly).extend(items)
    for process in processes:
        process.join(30)
    return samples, costly


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="seconds of idle probes")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 15 s of load")
    parser.add_argument(
        "--max-sql-bytes",
        type=int,
        default=1_048_576,
        help="the server's max_sql_bytes (the 1 MB statements stay under it)",
    )
    args = parser.parse_args()
    rows = 100_000 if args.quick else args.rows
    seconds = 15.0 if args.quick else args.seconds
    context = multiprocessing.get_context("fork")
    with harness.RefimplServer() as server:
        took = load(server, rows)
        print(f"loaded {rows:,} rows in {took:.1f} s ({rows / took:,.0f} rows/s)\n")
        target = {"url": server.url, "token": server.token}
        idle, _ = probe(context, target, rows, args.idle_seconds, None)
        statements = costly_statements(rows, args.max_sql_bytes)
        loaded, costly = probe(context, target, rows, seconds, statements)

    table = []
    checks = []
    for kind in ("/health", "point SELECT"):
        for phase, samples in (("idle", idle), (f"{CLIENTS} costly clients", loaded)):
            ms = [s[1] for s in samples if s[0] == kind]
            failed = sum(1 for s in samples if s[0] == kind and s[2] != 200)
            figures = harness.summary(ms)
            table.append(
                (
                    f"{kind}, {phase}",
                    figures["n"],
                    figures["p50"],
                    figures["p99"],
                    figures["max"],
                    failed,
                )
            )
            if phase != "idle":
                checks.append(
                    harness.Check(
                        f"{kind} p99 ms with {CLIENTS} costly clients",
                        figures["p99"],
                        f"< {TARGET_P99_MS:.0f} ms",
                        figures["p99"] < TARGET_P99_MS and not failed,
                    )
                )
    harness.print_table(
        ("probe", "asks", "p50 ms", "p99 ms", "max ms", "not 200"),
        table,
        title=f"the prober (every {PROBE_EVERY * 1000:.0f} ms, alternately)",
    )
    by_kind: dict[str, list] = {}
    for kind, status, spent in costly:
        by_kind.setdefault(kind, []).append((status, spent))
    rows_out = []
    for kind, _ in statements:
        done = by_kind.get(kind, [])
        statuses = Counter(status for status, _ in done)
        figures = harness.summary([spent for _, spent in done])
        rows_out.append(
            (
                kind,
                figures["n"],
                figures["p50"],
                figures["max"],
                ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())),
            )
        )
    harness.print_table(
        ("costly statement", "sent", "p50 s", "max s", "statuses"),
        rows_out,
        title=f"the {CLIENTS} costly clients over {seconds:.0f} s",
    )
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
