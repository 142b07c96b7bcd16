"""The PostgreSQL protocol: refimpl's port against PostgreSQL through psycopg, in one run.

Two workloads, each with 1 and with 16 concurrent clients on loopback, the same psycopg
code for both systems (one connection per client, autocommit, the extended protocol), each
sent two ways:

- point SELECT: `SELECT * FROM t WHERE id = %s` on a table of 10,000 rows;
- single-row INSERT: `INSERT INTO w VALUES (%s, %s, %s)`, each its own commit;
- "literal": the same statements with their values in the text, exactly the SQL that
  tools/bench/http.py sends PostgreSQL. Its rows measure refimpl's protocol against the very
  PostgreSQL workload that /exec's ratio is taken against, so the two ratios compare; with
  parameters, psycopg prepares a statement it has run 5 times and PostgreSQL then skips its
  parse and plan, which measures PostgreSQL's plan cache more than either protocol.

refimpl is a `refimpl serve --pg-port 0` process; PostgreSQL a throwaway cluster with fsync
and synchronous_commit on (`harness.Postgres`). Clients run in forked processes (up to
--procs, one thread per client). Each phase runs --seconds after a short warm-up; the table
shows requests/s, p50 and p99 of both and their ratio, and the refimpl server process's
CPU time (utime+stime, /proc) per request. Targets (issue 37), at 16 clients with
parameters (psycopg prepares them): point SELECT >= 0.6x PostgreSQL's rate, one-row INSERT
>= 0.8x.

    python tools/bench/pgwire.py            # 10 s per phase
    python tools/bench/pgwire.py --quick    # 3 s per phase
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import Any

import harness
import psycopg

ROWS = 10_000
PHASES = tuple(
    (op, clients)
    for op in ("select", "insert", "select literal", "insert literal")
    for clients in (1, 16)
)


def _client(
    conninfo: str,
    op: str,
    index: int,
    id_base: int,
    start_at: float,
    stop_at: float,
    out: list[Any],
) -> None:
    rng = random.Random(index)
    connection = psycopg.connect(conninfo, autocommit=True)
    latencies: list[float] = []
    errors = 0
    base = id_base + index * 10_000_000
    time.sleep(max(0.0, start_at - time.monotonic()))
    i = 0
    while (began := time.monotonic()) < stop_at:
        try:
            if op == "select":
                connection.execute("SELECT * FROM t WHERE id = %s", (rng.randrange(ROWS),))
            elif op == "insert":
                connection.execute(
                    "INSERT INTO w VALUES (%s, %s, %s)", (base + i, i * 0.5, f"row {i}")
                )
            elif op == "select literal":
                connection.execute(f"SELECT * FROM t WHERE id = {rng.randrange(ROWS)}")
            elif op == "simple-constants":  # the simple protocol: a text, never prepared
                connection.execute("SELECT 1, 2.5, 'x'", prepare=False)
            elif op == "simple-select":
                connection.execute(
                    f"SELECT * FROM t WHERE id = {rng.randrange(ROWS)}", prepare=False
                )
            else:
                connection.execute(f"INSERT INTO w VALUES ({base + i}, {i * 0.5}, 'row {i}')")
        except psycopg.Error:
            errors += 1
        i += 1
        if began >= start_at + harness.CLIENT_WARMUP:
            latencies.append(time.monotonic() - began)
    connection.close()
    out.append((latencies, errors))


def _process(
    conninfo: str, op: str, indexes: list[int], id_base: int, start_at: float, stop_at: float
) -> tuple[list[float], int]:
    out: list[Any] = []
    threads = [
        threading.Thread(target=_client, args=(conninfo, op, i, id_base, start_at, stop_at, out))
        for i in indexes
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [s for samples, _ in out for s in samples], sum(e for _, e in out)


def run_phase(
    conninfo: str,
    op: str,
    clients: int,
    procs: int,
    seconds: float,
    id_base: int,
    pid: int | None = None,
) -> dict[str, float]:
    """One phase's figures (`harness.run_client_phase`); with `pid`, also that server
    process's CPU time per request, as tools/bench/http.py reports it."""
    return harness.run_client_phase(_process, conninfo, op, clients, procs, seconds, id_base, pid)


def run_all(
    conninfo: str, procs: int, seconds: float, pid: int | None = None
) -> dict[tuple[str, int], dict]:
    return {
        (op, clients): run_phase(conninfo, op, clients, procs, seconds, n * 10**9, pid)
        for n, (op, clients) in enumerate(PHASES)
    }


def prepare_refimpl(server: harness.RefimplServer) -> str:
    server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    server.sql("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    server.import_csv("t", "id,v,s\n" + "".join(f"{i},{i * 0.25},row {i}\n" for i in range(ROWS)))
    line = next(x for x in server.output if x.startswith("postgres on "))
    host, _, port = line.removeprefix("postgres on ").strip().rpartition(":")
    return (
        f"host={host} port={port} user=admin dbname=demo password={server.token} connect_timeout=10"
    )


def prepare_postgres(pg: harness.Postgres) -> str:
    with pg.connect() as connection:
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
        connection.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
        connection.execute(
            "INSERT INTO t SELECT i, i * 0.25, 'row ' || i FROM generate_series(0, %s) i",
            (ROWS - 1,),
        )
        connection.execute("VACUUM ANALYZE t")
    return pg.conninfo


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per phase")
    parser.add_argument("--procs", type=int, default=4, help="load generator processes (max)")
    parser.add_argument("--threads", type=int, default=16, help="refimpl server threads")
    parser.add_argument("--quick", action="store_true", help="3 s per phase")
    args = parser.parse_args()
    seconds = 3.0 if args.quick else args.seconds

    server = harness.RefimplServer(threads=args.threads, extra=["--pg-port", "0"])
    with server:
        ours = run_all(prepare_refimpl(server), args.procs, seconds, server.pid)
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
        title=f"PostgreSQL protocol through psycopg: refimpl ({args.threads} threads) vs"
        f" PostgreSQL (fsync on), {seconds:g} s per phase",
    )
    checks = []
    for op, name, target in (
        ("select", "prepared point SELECT", 0.6),
        ("insert", "prepared one-row INSERT", 0.8),
    ):
        a, b = ours[(op, 16)]["rate"], theirs[(op, 16)]["rate"]
        checks.append(
            harness.Check(
                f"protocol {name} at 16 clients, req/s / PostgreSQL's",
                a / b,
                f">= {target}x",
                a >= target * b,
                ours=a,
                peer=b,
            )
        )
    for op in ("select", "insert"):
        checks.append(
            harness.Check(
                f"protocol {op} at 16 clients, server CPU ms/request", ours[(op, 16)]["cpu_ms"]
            )
        )
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
