"""COPY FROM STDIN against /imp of the same file and PostgreSQL's COPY through psycopg.

One CSV of --rows rows (id INT, ts TIMESTAMP, name STRING, v DOUBLE) is loaded three ways,
each into an empty table of a fresh server:

- refimpl `POST /exec?query=COPY t FROM STDIN WITH (FORMAT csv, HEADER)`, the file as body;
- refimpl `POST /imp?table=t`, the same file;
- PostgreSQL `COPY t FROM STDIN WITH (FORMAT csv, HEADER)` through psycopg's `cursor.copy`
  (a throwaway cluster, fsync on: `harness.Postgres`).

The table shows rows per second (the whole request: upload, parse, commit, durable) and
the server's peak RSS during the load (VmHWM, reset just before it; for PostgreSQL, the
backend of the loading connection). Target: COPY at least as fast as /imp.

    python tools/bench/copy.py                 # 1,000,000 rows
    python tools/bench/copy.py --rows 100000   # quicker
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import harness
import requests

TABLE = "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, name STRING, v DOUBLE)"
PG_TABLE = "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ, name TEXT, v DOUBLE PRECISION)"
COPY = "COPY t FROM STDIN WITH (FORMAT csv, HEADER)"


def make_csv(rows: int) -> bytes:
    rng = random.Random(7)
    names = ["alpha", "beta", "gamma, delta", "epsilon"]
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    lines = ["id,ts,name,v"]
    for i in range(rows):
        moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + i))
        name = names[i % 4]
        field = f'"{name}"' if "," in name else name
        lines.append(f"{i},{moment},{field},{rng.random() * 1000:.3f}")
    return ("\n".join(lines) + "\n").encode()


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_refimpl(body: bytes, rows: int, how: str) -> tuple[float, float]:
    with harness.RefimplServer() as server:
        server.sql(TABLE)
        _reset_peak(server.pid)
        started = time.perf_counter()
        if how == "copy":
            answer = requests.post(
                f"{server.url}/exec",
                params={"query": COPY},
                data=body,
                headers={**server.headers, "Content-Type": "text/csv"},
                timeout=3600,
            )
        else:
            answer = requests.post(
                f"{server.url}/imp",
                params={"table": "t"},
                data=body,
                headers={**server.headers, "Content-Type": "text/csv"},
                timeout=3600,
            )
        seconds = time.perf_counter() - started
        if answer.status_code != 200 or answer.json()["count"] != rows:
            raise RuntimeError(f"{how}: {answer.status_code} {answer.text[:300]}")
        return rows / seconds, _peak_mb(server.pid)


def load_postgres(body: bytes, rows: int) -> tuple[float, float]:
    with harness.Postgres() as postgres:
        connection = postgres.connect()
        with connection.cursor() as cursor:
            cursor.execute(PG_TABLE)
            backend = cursor.execute("SELECT pg_backend_pid()").fetchone()[0]
            _reset_peak(backend)
            started = time.perf_counter()
            with cursor.copy(COPY) as copy:
                for at in range(0, len(body), 1 << 20):
                    copy.write(body[at : at + (1 << 20)])
            seconds = time.perf_counter() - started
            peak = _peak_mb(backend)
            count = cursor.execute("SELECT count(*) FROM t").fetchone()[0]
        connection.close()
        if count != rows:
            raise RuntimeError(f"PostgreSQL loaded {count} rows of {rows}")
        return rows / seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--no-postgres", action="store_true", help="refimpl only")
    args = parser.parse_args()
    body = make_csv(args.rows)
    results = {
        "refimpl COPY FROM STDIN": load_refimpl(body, args.rows, "copy"),
        "refimpl /imp": load_refimpl(body, args.rows, "imp"),
    }
    if not args.no_postgres:
        results["PostgreSQL COPY (psycopg)"] = load_postgres(body, args.rows)
    harness.print_table(
        ["load", "rows/s", "server peak RSS MB"],
        [[name, f"{rate:,.0f}", f"{peak:,.0f}"] for name, (rate, peak) in results.items()],
        title=f"{args.rows:,} rows, {len(body) / 2**20:.1f} MB of CSV",
    )
    copy_rate, imp_rate = results["refimpl COPY FROM STDIN"][0], results["refimpl /imp"][0]
    ratio = copy_rate / imp_rate
    checks = [harness.Check("COPY rows/s / (/imp rows/s)", ratio, ">= 1", ratio >= 1)]
    if "PostgreSQL COPY (psycopg)" in results:
        theirs = results["PostgreSQL COPY (psycopg)"][0]
        checks.append(
            harness.Check(
                "COPY FROM STDIN rows/s / PostgreSQL's",
                copy_rate / theirs,
                ours=copy_rate,
                peer=theirs,
            )
        )
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
