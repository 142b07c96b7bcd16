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

refimpl is `refimpl serve --pg-port 0`; PostgreSQL a throwaway cluster (fsync on). Target
(issue 34): refimpl's time at most twice PostgreSQL's for each, i.e. rate >= 0.5x.

    python tools/bench/clients.py              # 100,000 rows, 3 runs each
    python tools/bench/clients.py --quick      # 20,000 rows
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

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


def load_binary(conninfo: str, table: str, rows: list[Row]) -> float:
    """Seconds to COPY `rows` into `table` in binary format through psycopg."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        cursor = connection.cursor()
        began = time.perf_counter()
        with cursor.copy(f"COPY {table} (id, at, v, s) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["int8", "timestamptz", "float8", "text"])
            for row in rows:
                copy.write_row(row)
        seconds = time.perf_counter() - began
        count = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        if count is None or count[0] != len(rows):
            raise RuntimeError(f"{table}: {count} rows after COPY of {len(rows)}")
    return seconds


def read_frame(conninfo: str) -> tuple[float, pandas.DataFrame]:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        began = time.perf_counter()
        with warnings.catch_warnings():
            # pandas warns of any DBAPI connection but sqlite3's; the issue asks for this one.
            warnings.simplefilter("ignore", UserWarning)
            frame = pandas.read_sql("SELECT id, at, v, s FROM t ORDER BY id", connection)
        return time.perf_counter() - began, frame


def measure(
    conninfo: str, rows: list[Row], repeat: int, create: Callable[[str], None]
) -> dict[str, Any]:
    create("t")
    load_binary(conninfo, "t", rows)
    copy_times = []
    for n in range(repeat):
        create(f"w{n}")
        copy_times.append(load_binary(conninfo, f"w{n}", rows))
    read_times = []
    frame = None
    for _ in range(repeat):
        seconds, frame = read_frame(conninfo)
        read_times.append(seconds)
    return {
        "copy": statistics.median(copy_times),
        "read": statistics.median(read_times),
        "frame": frame,
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

    with harness.RefimplServer(extra=["--pg-port", "0"]) as server:
        conninfo = refimpl_conninfo(server)

        def create_refimpl(table: str) -> None:
            server.sql(
                f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, at TIMESTAMP, v DOUBLE, s STRING)"
            )

        ours = measure(conninfo, rows, args.repeat, create_refimpl)
    with harness.Postgres() as pg:

        def create_postgres(table: str) -> None:
            with pg.connect() as connection:
                connection.execute(
                    f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, at TIMESTAMPTZ,"
                    " v DOUBLE PRECISION, s TEXT)"
                )

        theirs = measure(pg.conninfo, rows, args.repeat, create_postgres)

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
        title=f"{count:,} rows, median of {args.repeat} runs; frames equal, dtypes included",
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
