"""What a data client pays: pandas `read_sql` and psycopg binary COPY in, refimpl against
PostgreSQL 15, in one run.

1. `pandas.read_sql("SELECT * FROM t", connection)` of --rows rows (a BIGINT key, a
   TIMESTAMP, a DOUBLE with NULLs, a text; PostgreSQL's table has TIMESTAMPTZ, the type
   refimpl's TIMESTAMP is sent as) over a plain psycopg connection: seconds, median of
   --repeat runs, each side its own server on loopback; the frames of both are checked equal
   (values and dtypes) before a figure is shown.
2. `COPY w FROM STDIN (FORMAT binary)` of the same rows through psycopg's `cursor.copy()`
   with `write_row` (psycopg encodes the binary tuples): seconds, median of --repeat runs,
   then the rows counted on each side.

refimpl is `refimpl serve --pg-port 0`; PostgreSQL a throwaway cluster (fsync on); both run
at once and each run goes to each in turn, so that the machine's load falls on both. The
server CPU of a COPY is shown beside (refimpl's process; PostgreSQL's backend alone). Target
(issue 34): refimpl's time at most twice PostgreSQL's for each, i.e. rate >= 0.5x.

    python tools/bench/clients.py              # 100,000 rows, 3 runs each
    python tools/bench/clients.py --quick      # 20,000 rows
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import harness
import pandas
import psycopg

Row = tuple[int, datetime.datetime, float | None, str]


def make_rows(count: int) -> list[Row]:
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return [
        (
            i,
            start + datetime.timedelta(seconds=i),
            None if i % 10 == 0 else i * 0.5,
            f"row {i}",
        )
        for i in range(count)
    ]


def refimpl_conninfo(server: harness.RefimplServer) -> str:
    line = next(x for x in server.output if x.startswith("postgres on "))
    host, _, port = line.removeprefix("postgres on ").strip().rpartition(":")
    return (
        f"host={host} port={port} user=admin dbname=demo password={server.token} connect_timeout=10"
    )


def load_binary(conninfo: str, table: str, rows: list[Row], server_pid: int | None) -> Copy:
    """Seconds to COPY `rows` into `table` in binary format through psycopg, and the CPU
    seconds the server spent meanwhile: refimpl's whole process (`server_pid`), or, for
    PostgreSQL (None), the backend of the connection (its other processes not counted)."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        if server_pid is None:
            backend = connection.execute("SELECT pg_backend_pid()").fetchone()
            assert backend is not None
            server_pid = int(backend[0])
        cursor = connection.cursor()
        cpu = harness.cpu_seconds(server_pid)
        began = time.perf_counter()
        with cursor.copy(f"COPY {table} (id, at, v, s) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["int8", "timestamptz", "float8", "text"])
            for row in rows:
                copy.write_row(row)
        seconds = time.perf_counter() - began
        cpu = harness.cpu_seconds(server_pid) - cpu
        count = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        if count is None or count[0] != len(rows):
            raise RuntimeError(f"{table}: {count} rows after COPY of {len(rows)}")
    return Copy(seconds, cpu)


class Copy(NamedTuple):
    seconds: float
    server_cpu: float


def read_frame(conninfo: str) -> tuple[float, pandas.DataFrame]:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        began = time.perf_counter()
        with warnings.catch_warnings():
            # pandas warns of any DBAPI connection but sqlite3's; the issue asks for this one.
            warnings.simplefilter("ignore", UserWarning)
            frame = pandas.read_sql("SELECT id, at, v, s FROM t ORDER BY id", connection)
        return time.perf_counter() - began, frame


class Side(NamedTuple):
    """One server as the runs use it."""

    conninfo: str
    create: Callable[[str], None]
    pid: int | None  # refimpl's process; None: PostgreSQL's backend of each connection


def measure(sides: dict[str, Side], rows: list[Row], repeat: int) -> dict[str, dict[str, Any]]:
    """Each step on each side in turn (refimpl, PostgreSQL, refimpl, ...), so that a change
    in the machine's load falls on both: medians of `repeat` runs of each."""
    copies: dict[str, list[Copy]] = {name: [] for name in sides}
    reads: dict[str, list[float]] = {name: [] for name in sides}
    frames: dict[str, pandas.DataFrame] = {}
    for side in sides.values():
        side.create("t")
        load_binary(side.conninfo, "t", rows, side.pid)
    for n in range(repeat):
        for name, side in sides.items():
            side.create(f"w{n}")
            copies[name].append(load_binary(side.conninfo, f"w{n}", rows, side.pid))
    for _ in range(repeat):
        for name, side in sides.items():
            seconds, frames[name] = read_frame(side.conninfo)
            reads[name].append(seconds)
    return {
        name: {
            "copy": statistics.median(c.seconds for c in copies[name]),
            "copy_cpu": statistics.median(c.server_cpu for c in copies[name]),
            "read": statistics.median(reads[name]),
            "frame": frames[name],
        }
        for name in sides
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20,000 rows")
    args = parser.parse_args()
    count = 20_000 if args.quick else args.rows
    rows = make_rows(count)

    with harness.RefimplServer(extra=["--pg-port", "0"]) as server, harness.Postgres() as pg:

        def create_refimpl(table: str) -> None:
            server.sql(
                f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, at TIMESTAMP, v DOUBLE, s STRING)"
            )

        def create_postgres(table: str) -> None:
            with pg.connect() as connection:
                connection.execute(
                    f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, at TIMESTAMPTZ,"
                    " v DOUBLE PRECISION, s TEXT)"
                )

        assert server.process is not None
        sides = {
            "refimpl": Side(refimpl_conninfo(server), create_refimpl, server.process.pid),
            "postgres": Side(pg.conninfo, create_postgres, None),
        }
        figures = measure(sides, rows, args.repeat)
    ours, theirs = figures["refimpl"], figures["postgres"]
    load = os.getloadavg()[0]

    pandas.testing.assert_frame_equal(ours["frame"], theirs["frame"])
    harness.print_table(
        ("step", "refimpl s", "PostgreSQL s", "refimpl rows/s", "PostgreSQL rows/s", "rate ratio"),
        [
            (
                name,
                ours[key],
                theirs[key],
                count / ours[key],
                count / theirs[key],
                theirs[key] / ours[key],
            )
            for key, name in (("read", "pandas.read_sql"), ("copy", "psycopg binary COPY in"))
        ],
        title=f"{count:,} rows, median of {args.repeat} runs, each side in turn; frames equal,"
        f" dtypes included; load average {load:.1f}",
    )
    print(
        f"server CPU during a COPY (median): refimpl {ours['copy_cpu']:.3f} s (its process),"
        f" PostgreSQL {theirs['copy_cpu']:.3f} s (the backend alone)\n"
    )
    harness.print_checks(
        [
            harness.Check(
                f"{name} rows/s / PostgreSQL's",
                theirs[key] / ours[key],
                ">= 0.5x",
                theirs[key] / ours[key] >= 0.5,
                ours=count / ours[key],
                peer=count / theirs[key],
            )
            for key, name in (("read", "pandas read_sql"), ("copy", "psycopg binary COPY in"))
        ]
    )


if __name__ == "__main__":
    main()
