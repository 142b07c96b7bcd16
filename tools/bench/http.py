"""HTTP requests per second: refimpl's /exec against PostgreSQL through psycopg, in one run.

Two workloads, each with 1 and with 16 concurrent clients on loopback:

- point SELECT: `SELECT * FROM t WHERE id = <random>` on a table of 10,000 rows;
- single-row INSERT: `INSERT INTO w VALUES (<new id>, <v>, '<s>')`, each its own commit.

refimpl is a `refimpl serve` process answering POST /exec (text/plain SQL, one keep-alive
connection per client through `harness.LeanHTTP`, or `requests.Session` with --client
requests: requests alone costs more CPU per request than the server does, on the same
cores); PostgreSQL is a throwaway cluster with fsync and
synchronous_commit on, one psycopg connection per client (autocommit), the same SQL text.
The load generator runs in its own processes (clients spread over up to --procs processes,
one thread per client). Each phase runs --seconds after a short warm-up and reports
requests/s, p50 and p99; the table shows both systems side by side and their ratio, and the
refimpl server process's CPU time (utime+stime, /proc) per request.

Targets (issue 21): 16-client INSERT throughput >= 0.6x PostgreSQL's, point SELECT >= 0.8x;
point SELECT p99 < 10 ms with 16 clients.

`--profile` then runs the 16-client INSERT phase once more against a server whose worker
threads are profiled (cProfile per thread, merged; the server is stopped with SIGINT so the
profile is written) and prints the top 15 functions by cumulative and by total time.

    python tools/bench/http.py                 # full run: 10 s per phase, about 2 minutes
    python tools/bench/http.py --quick         # 3 s per phase
    python tools/bench/http.py --quick --profile
"""

from __future__ import annotations

import argparse
import pstats
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import harness
import psycopg
import requests

ROWS = 10_000


# --- load generator (runs in forked processes) ----------------------------------------------


def _statement(op: str, rng: random.Random, id_base: int, i: int) -> str:
    if op == "select":
        return f"SELECT * FROM t WHERE id = {rng.randrange(ROWS)}"
    return f"INSERT INTO w VALUES ({id_base + i}, {i * 0.5}, 'row {i}')"


def _client(
    target: dict[str, Any],
    op: str,
    index: int,
    id_base: int,
    start_at: float,
    stop_at: float,
    out: list[Any],
) -> None:
    rng = random.Random(index)
    latencies: list[float] = []
    errors = 0
    base = id_base + index * 10_000_000
    if target["kind"] == "refimpl" and target["client"] == "requests":
        session = requests.Session()
        url = target["url"] + "/exec"
        headers = {"Authorization": f"Bearer {target['token']}", "Content-Type": "text/plain"}

        def run(sql: str) -> bool:
            return session.post(url, data=sql.encode(), headers=headers).status_code == 200

        close = session.close
    elif target["kind"] == "refimpl":
        lean = harness.LeanHTTP(
            target["url"],
            {"Authorization": f"Bearer {target['token']}", "Content-Type": "text/plain"},
        )

        def run(sql: str) -> bool:
            return lean.request("POST", "/exec", sql.encode())[0] == 200

        close = lean.close
    else:
        connection = psycopg.connect(target["conninfo"], autocommit=True)

        def run(sql: str) -> bool:
            cursor = connection.execute(sql)
            if op == "select":
                cursor.fetchall()
            return True

        close = connection.close
    warm_at = start_at + harness.CLIENT_WARMUP
    time.sleep(max(0.0, start_at - time.monotonic()))
    i = 0
    while True:
        began = time.monotonic()
        if began >= stop_at:
            break
        sql = _statement(op, rng, base, i)
        i += 1
        try:
            ok = run(sql)
        except Exception:  # noqa: BLE001 - counted, the run goes on
            ok = False
        if not ok:
            errors += 1
        if began >= warm_at:
            latencies.append(time.monotonic() - began)
    close()
    out.append((latencies, errors))


def _process(
    target: dict[str, Any],
    op: str,
    indexes: list[int],
    id_base: int,
    start_at: float,
    stop_at: float,
) -> tuple[list[float], int]:
    out: list[Any] = []
    threads = [
        threading.Thread(target=_client, args=(target, op, i, id_base, start_at, stop_at, out))
        for i in indexes
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [s for samples, _ in out for s in samples], sum(e for _, e in out)


def run_phase(
    target: dict[str, Any], op: str, clients: int, procs: int, seconds: float, id_base: int
) -> dict[str, float]:
    return harness.run_client_phase(
        _process, target, op, clients, procs, seconds, id_base, target.get("pid")
    )


# --- the two systems ------------------------------------------------------------------------


def csv_rows(count: int) -> str:
    return "id,v,s\n" + "".join(f"{i},{i * 0.25},row {i}\n" for i in range(count))


def prepare_refimpl(server: harness.RefimplServer, client: str) -> dict[str, Any]:
    server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    server.sql("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    server.import_csv("t", csv_rows(ROWS))
    return {
        "kind": "refimpl",
        "url": server.url,
        "token": server.token,
        "pid": server.pid,
        "client": client,
    }


def prepare_postgres(pg: harness.Postgres) -> dict[str, Any]:
    with pg.connect() as connection:
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
        connection.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
        connection.execute(
            "INSERT INTO t SELECT i, i * 0.25, 'row ' || i FROM generate_series(0, %s) i",
            (ROWS - 1,),
        )
        connection.execute("VACUUM ANALYZE t")
    return {"kind": "pg", "conninfo": pg.conninfo}


PHASES = (("select", 1), ("select", 16), ("insert", 1), ("insert", 16))


def run_all(target: dict[str, Any], procs: int, seconds: float) -> dict[tuple[str, int], dict]:
    out = {}
    for number, (op, clients) in enumerate(PHASES):
        out[(op, clients)] = run_phase(target, op, clients, procs, seconds, number * 10**9)
    return out


def profile_inserts(threads: int, procs: int, seconds: float, client: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "server.prof"
        server = harness.RefimplServer(threads=threads, profile=path)
        with server:
            target = prepare_refimpl(server, client)
            figures = run_phase(target, "insert", 16, procs, seconds, 0)
        print(
            f"profiled server, 16-client INSERT: {figures['rate']:.0f} req/s"
            f" (p50 {figures['p50']:.2f} ms, p99 {figures['p99']:.2f} ms)\n"
        )
        stats = pstats.Stats(str(path))
        stats.strip_dirs()
        print("top 15 by cumulative time (worker threads):")
        stats.sort_stats("cumulative").print_stats(15)
        print("top 15 by total time (worker threads):")
        stats.sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per phase")
    parser.add_argument("--procs", type=int, default=4, help="load generator processes (max)")
    parser.add_argument("--threads", type=int, default=16, help="refimpl server threads")
    parser.add_argument("--quick", action="store_true", help="3 s per phase")
    parser.add_argument(
        "--client",
        choices=("lean", "requests"),
        default="lean",
        help="refimpl's load generator: harness.LeanHTTP (default) or requests",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile the server during the 16-client INSERT phase",
    )
    args = parser.parse_args()
    seconds = 3.0 if args.quick else args.seconds

    with harness.RefimplServer(threads=args.threads) as server:
        ours = run_all(prepare_refimpl(server, args.client), args.procs, seconds)
    with harness.Postgres() as pg:
        theirs = run_all(prepare_postgres(pg), args.procs, seconds)

    rows = []
    for op, clients in PHASES:
        a, b = ours[(op, clients)], theirs[(op, clients)]
        rows.append(
            (
                f"{op} x{clients}",
                a["rate"],
                b["rate"],
                a["rate"] / b["rate"],
                a["p50"],
                b["p50"],
                a["p99"],
                b["p99"],
                a["cpu_ms"],
                f"{a['errors']}/{b['errors']}",
            )
        )
    harness.print_table(
        (
            "workload",
            "refimpl/s",
            "pg/s",
            "ratio",
            "p50 ms",
            "pg p50",
            "p99 ms",
            "pg p99",
            "CPU ms/req",
            "errors",
        ),
        rows,
        title=f"HTTP /exec (refimpl, {args.threads} server threads, {args.client} client)"
        f" vs psycopg (PostgreSQL, fsync on), {seconds:g} s per phase",
    )
    checks = []
    for op, name in (("insert", "one-row INSERT"), ("select", "point SELECT")):
        a, b = ours[(op, 16)]["rate"], theirs[(op, 16)]["rate"]
        checks.append(
            harness.Check(
                f"/exec {name} at 16 clients, req/s / PostgreSQL's",
                a / b,
                ">= 0.5x",
                a >= 0.5 * b,
                ours=a,
                peer=b,
            )
        )
    select_p99 = ours[("select", 16)]["p99"]
    checks.append(
        harness.Check(
            "/exec point SELECT at 16 clients, p99 (ms)",
            select_p99,
            "< 10 ms",
            select_p99 < 10,
            peer=theirs[("select", 16)]["p99"],
        )
    )
    for op in ("insert", "select"):
        checks.append(
            harness.Check(
                f"/exec {op} at 16 clients, server CPU ms/request", ours[(op, 16)]["cpu_ms"]
            )
        )
    harness.print_checks(checks)
    if args.profile:
        profile_inserts(args.threads, args.procs, seconds, args.client)


if __name__ == "__main__":
    main()
