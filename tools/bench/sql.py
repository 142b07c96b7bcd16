"""The embedded engine (`refimpl.connect`) against the standard library's `sqlite3`, on the
same data in the same run: joins with and without an index, a correlated EXISTS, GROUP BY
over a join, a UNION, and a point lookup through a secondary index.

Every query fetches all its rows; each time is the median of `--repeat` runs. A query the
engine refuses (a feature not there yet) is reported as such, not as a failure of the run.
Targets (issue 18): the join within 5x of SQLite's time; the index lookup under 0.1 ms.

    python tools/bench/sql.py [--rows 100000] [--big 1000000] [--repeat 3] [--lookups 2000]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.errors import KdbError

JOIN = "SELECT a.id, b.w FROM a JOIN b ON a.k = b.k"
QUERIES = [
    ("join on a column, no index", JOIN, False),
    ("join on a column, index on b.k", JOIN, True),
    (
        "correlated EXISTS",
        "SELECT a.id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.w > 500)",
        True,
    ),
    (
        "GROUP BY over a join",
        "SELECT b.w % 10 AS g, count(*) AS n, sum(a.v) AS s"
        " FROM a JOIN b ON a.k = b.k GROUP BY b.w % 10",
        True,
    ),
    ("UNION of two selections", "SELECT k FROM a UNION SELECT k FROM b", True),
]


def _median_seconds(run: Callable[[], Any], repeat: int) -> tuple[float, int]:
    times = []
    count = 0
    for _ in range(repeat):
        started = time.perf_counter()
        count = len(run())
        times.append(time.perf_counter() - started)
    return statistics.median(times), count


def _load(engine: Any, lite: sqlite3.Connection, rows: int, big: int) -> None:
    rng = random.Random(18)
    keys = list(range(rows))
    a = [(i, k, rng.randrange(1000)) for i, k in enumerate(rng.sample(keys, rows))]
    b = [(i, k, rng.randrange(1000)) for i, k in enumerate(rng.sample(keys, rows))]
    c = [(i, rng.randrange(big), i % 997) for i in range(big)]
    for name, data, third in (("a", a, "v"), ("b", b, "w"), ("c", c, "v")):
        engine.execute(f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, k BIGINT, {third} BIGINT)")
        loader = engine.session()
        loader.insert_rows(name, ["id", "k", third], data)
        loader.close()
        lite.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, k INTEGER, {third} INTEGER)")
        lite.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)", data)
    lite.commit()
    for db in (engine, lite):
        db.execute("CREATE INDEX c_k ON c (k)")


def _engine_rows(engine: Any, sql: str) -> Callable[[], list]:
    return lambda: engine.execute(sql).rows


def _lite_rows(lite: sqlite3.Connection, sql: str) -> Callable[[], list]:
    return lambda: lite.execute(sql).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of tables a and b")
    parser.add_argument("--big", type=int, default=1_000_000, help="rows of table c")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (median)")
    parser.add_argument("--lookups", type=int, default=2000, help="point lookups timed")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        engine = refimpl.connect(
            Path(folder) / "data", options=EngineOptions(statement_timeout=600.0)
        )
        lite = sqlite3.connect(Path(folder) / "lite.db")
        started = time.perf_counter()
        _load(engine, lite, options.rows, options.big)
        print(
            f"loaded {options.rows:,} + {options.rows:,} + {options.big:,} rows into both"
            f" in {time.perf_counter() - started:.1f} s\n"
        )
        table = []
        checks = []
        indexed = False
        for label, sql, wants_index in QUERIES:
            if wants_index and not indexed:
                for db in (engine, lite):
                    db.execute("CREATE INDEX b_k ON b (k)")
                indexed = True
            lite_s, lite_n = _median_seconds(_lite_rows(lite, sql), options.repeat)
            try:
                ours_s, ours_n = _median_seconds(_engine_rows(engine, sql), options.repeat)
            except KdbError as error:
                table.append(
                    (
                        label,
                        float("nan"),
                        lite_s * 1e3,
                        float("nan"),
                        f"refused: {error.message[:60]}",
                    )
                )
                continue
            note = "" if ours_n == lite_n else f"ROWS DIFFER: {ours_n} vs {lite_n}"
            table.append((label, ours_s * 1e3, lite_s * 1e3, ours_s / lite_s, note))
            if label.startswith("join"):
                checks.append(
                    harness.Check(
                        f"{label}: refimpl / sqlite", ours_s / lite_s, "<= 5x", ours_s / lite_s <= 5
                    )
                )
        rng = random.Random(7)
        probes = [rng.randrange(options.big) for _ in range(options.lookups)]
        point = "SELECT id, v FROM c WHERE k = ?"
        samples = []
        for value in probes:
            begun = time.perf_counter()
            assert engine.execute(point, (value,)).columns is not None
            samples.append(time.perf_counter() - begun)
        lite_samples = []
        for value in probes:
            begun = time.perf_counter()
            lite.execute(point, (value,)).fetchall()
            lite_samples.append(time.perf_counter() - begun)
        ours_ms = statistics.median(samples) * 1e3
        lite_ms = statistics.median(lite_samples) * 1e3
        table.append(
            (
                f"point lookup by index, {options.big:,} rows (p50)",
                ours_ms,
                lite_ms,
                ours_ms / lite_ms,
                "",
            )
        )
        checks.append(harness.Check("index lookup p50 (ms)", ours_ms, "< 0.1 ms", ours_ms < 0.1))
        harness.print_table(["query", "refimpl ms", "sqlite ms", "ratio", "note"], table)
        harness.print_checks(checks)
        engine.close()
        lite.close()


if __name__ == "__main__":
    main()
