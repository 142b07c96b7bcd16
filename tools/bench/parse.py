"""Parsing and statement execution cost, without the wait for the fsync.

Prints statements parsed per second for a typical INSERT and SELECT (parser cache bypassed),
and the median time to parse and execute a single-row INSERT: unparameterised (new text
every time, so always parsed) and parameterised (parsed once, then cached). Execution runs
inside an open transaction, so no commit waits for the disk.

    python tools/bench/parse.py [--rounds 20000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import harness

import refimpl
from refimpl.sql.parser import parse

INSERT = "INSERT INTO trades VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1510.5, {i})"
SELECT = (
    "SELECT date_trunc('minute', time) AS m, first(price) AS open, max(price) AS high,"
    " min(price) AS low, last(price) AS close FROM trades WHERE symbol = 'NABIL'"
    " GROUP BY m ORDER BY m"
)
CREATE = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE, qty BIGINT)"
    " TIMESERIES(time) PARTITION BY DAY"
)


def parse_rate(text_of, rounds: int) -> float:
    started = time.perf_counter()
    for i in range(rounds):
        parse(text_of(i))
    return rounds / (time.perf_counter() - started)


def median_us(run, rounds: int) -> float:
    samples = []
    for i in range(rounds):
        t0 = time.perf_counter()
        run(i)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    rounds = args.rounds

    insert_rate = parse_rate(lambda i: INSERT.format(i=i), rounds)
    select_rate = parse_rate(lambda i: SELECT + f" LIMIT {i + 1}", rounds // 4)

    with tempfile.TemporaryDirectory() as folder:
        connection = refimpl.connect(folder)
        connection.execute(CREATE)
        session = connection.session()
        session.execute("BEGIN")
        unparameterised = median_us(lambda i: session.execute(INSERT.format(i=i)), rounds)
        parameterised = median_us(
            lambda i: session.execute(
                "INSERT INTO trades VALUES (?, ?, ?, ?)",
                ("2026-09-24T10:00:00Z", "NABIL", 1510.5, rounds + i),
            ),
            rounds,
        )
        session.execute("ROLLBACK")
        connection.close()

    harness.print_table(
        ("parsed, cache bypassed", "statements/s"),
        [("INSERT", insert_rate), ("candle SELECT", select_rate)],
    )
    harness.print_checks(
        [
            harness.Check(
                "INSERT parse + execute, unparameterised (us median)",
                unparameterised,
                "< 250 us",
                unparameterised < 250,
            ),
            harness.Check(
                "INSERT execute, parameterised and cached (us median)",
                parameterised,
                "< 60 us",
                parameterised < 60,
            ),
        ]
    )


if __name__ == "__main__":
    main()
