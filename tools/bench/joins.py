"""Joins of up to 8 tables: the comma form against the JOIN ... ON form, and SQLite's time
for the same queries (issue 33).

Tables t1..t8 of --rows rows (1,000 by default): `id` (the key), `fk` (a row of the next
table), `g` (ten groups) and `v` (a hundred values). Each generated query joins k tables
(2 to 8) in a chain whose links are `t<i>.fk = t<j>.id` (a key) or `t<i>.v = t<j>.v` (no
key), with a filter on each table (`g = c` or `v < c`), written twice: `FROM t1, t2, ...
WHERE links AND filters`, and `FROM t1 JOIN t2 ON link ... WHERE filters`. Each query runs
in refimpl (embedded, no server between) and in SQLite (Python's sqlite3, in memory, the
same rows, an index on each id as its key); each time is the best of --repeat runs with
new constants (no run is served from a cache), the two forms in turn (each first every
other time), each run timed in the CPU time of the thread that runs it (the query runs on
it, embedded) with the garbage collector paused: other processes of a busy machine and a
collector's pass at a random moment do not blur the ratio. Each query's two forms must have
the same plan (EXPLAIN) and the same answer. Printed: per k, the slowest query of each
kind, the comma/ON ratio and refimpl/SQLite ratio; then the targets: the comma and ON forms
within 1.5x, every query under 100 ms.

    python tools/bench/joins.py                 # 40 queries, 1,000 rows a table
    python tools/bench/joins.py --queries 100 --rows 2000
"""

from __future__ import annotations

import sys
from pathlib import Path

# This folder's copy.py (the COPY benchmark) would hide the standard library's copy module.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import argparse  # noqa: E402
import gc  # noqa: E402
import random  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import refimpl  # noqa: E402

TABLES = 8


def _load(db: refimpl.Connection, lite: sqlite3.Connection, rows: int, seed: int) -> None:
    rng = random.Random(seed)
    for n in range(1, TABLES + 1):
        create = f"CREATE TABLE t{n} (id INT PRIMARY KEY, fk INT, g INT, v INT)"
        db.execute(create)
        lite.execute(create)
        values = [
            (i, rng.randrange(rows), rng.randrange(10), rng.randrange(100)) for i in range(rows)
        ]
        for start in range(0, rows, 500):
            chunk = values[start : start + 500]
            db.execute(f"INSERT INTO t{n} VALUES " + ", ".join(map(str, chunk)))
        lite.executemany(f"INSERT INTO t{n} VALUES (?, ?, ?, ?)", values)
    lite.commit()


def _query(rng: random.Random, k: int) -> tuple[list[str], list[str], list[tuple[str, int]]]:
    """Tables, links (t<i> to one before it) and filters with a constant to vary."""
    tables = [f"t{n}" for n in rng.sample(range(1, TABLES + 1), k)]
    links = []
    grouped = set()
    for i in range(1, k):
        j = rng.randrange(i)
        a, b = tables[j], tables[i]
        if rng.random() < 0.7:
            links.append(f"{a}.fk = {b}.id")
        else:
            # A link without a key joins two tables filtered to a group each (about 100
            # rows): the answer stays about as large as the tables, as a user's would.
            links.append(f"{a}.v = {b}.v")
            grouped |= {a, b}
    filters = []
    for t in tables:
        if t in grouped or rng.random() < 0.5:
            filters.append((f"{t}.g = {{}}", rng.randrange(10)))
        else:
            filters.append((f"{t}.v < {{}}", 20 + rng.randrange(60)))
    return tables, links, filters


def _texts(tables: list[str], links: list[str], filters: list[str]) -> tuple[str, str]:
    items = "SELECT count(*), sum(" + tables[0] + ".v)"
    comma = f"{items} FROM {', '.join(tables)} WHERE {' AND '.join(links + filters)}"
    joined = tables[0]
    for table, link in zip(tables[1:], links, strict=True):
        joined += f" JOIN {table} ON {link}"
    on = f"{items} FROM {joined} WHERE {' AND '.join(filters)}"
    return comma, on


def _best(run, texts: list[str]) -> tuple[float, object]:  # noqa: ANN001 - a callable
    times = []
    answer = None
    gc.collect()
    for text in texts:
        gc.disable()
        try:
            began = time.thread_time()
            answer = run(text)
            times.append(time.thread_time() - began)
        finally:
            gc.enable()
    return min(times) * 1000, answer


def _best_in_turn(run, pairs: list[tuple[str, str]]) -> tuple[float, float, object, object]:  # noqa: ANN001
    """The best time of each form and their answers. The forms run in turn, each first every
    other time, so that whatever slows or warms one run does so for its partner too."""
    times: tuple[list[float], list[float]] = ([], [])
    answers: list[object] = [None, None]
    for number, pair in enumerate(pairs):
        for slot in (0, 1) if number % 2 == 0 else (1, 0):
            ms, answers[slot] = _best(run, [pair[slot]])
            times[slot].append(ms)
    return min(times[0]), min(times[1]), answers[0], answers[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        db = refimpl.connect(Path(folder) / "data")
        lite = sqlite3.connect(":memory:")
        _load(db, lite, args.rows, args.seed)

        def ours(text: str) -> object:
            return [tuple(row) for row in db.execute(text).rows]

        def theirs(text: str) -> object:
            return [tuple(row) for row in lite.execute(text).fetchall()]

        by_k: dict[int, list[tuple[float, float, float]]] = {}
        for number in range(args.queries):
            k = 2 + number % (TABLES - 1)
            tables, links, filters = _query(rng, k)
            runs = []
            for r in range(args.repeat):
                shown = [f.format(c + r) for f, c in filters]
                runs.append(_texts(tables, links, shown))
            comma_plan, on_plan = (db.execute("EXPLAIN " + text).rows for text in runs[0])
            if comma_plan != on_plan:
                raise SystemExit(f"the plans differ: {runs[0][0]}\n{comma_plan}\n{on_plan}")
            comma_ms, on_ms, comma_answer, on_answer = _best_in_turn(ours, runs)
            lite_ms, lite_answer = _best(theirs, [c for c, _ in runs])
            if not comma_answer == on_answer == lite_answer:
                raise SystemExit(f"answers differ: {runs[-1][0]}")
            by_k.setdefault(k, []).append((comma_ms, on_ms, lite_ms))
        print(
            f"{'tables':>6} {'queries':>7} {'comma ms':>9} {'ON ms':>7} {'SQLite ms':>9}"
            f" {'comma/ON':>8} {'refimpl/SQLite':>14}   (slowest query of each k)"
        )
        worst = 0.0
        ratios = []
        lite_ratios = []
        for k in sorted(by_k):
            rows = by_k[k]
            comma = max(r[0] for r in rows)
            on = max(r[1] for r in rows)
            lite_ms = max(r[2] for r in rows)
            ratios += [max(r[0], r[1]) / max(min(r[0], r[1]), 1e-3) for r in rows]
            lite_ratios += [r[0] / max(r[2], 1e-3) for r in rows]
            worst = max(worst, comma, on)
            print(
                f"{k:>6} {len(rows):>7} {comma:>9.2f} {on:>7.2f} {lite_ms:>9.2f}"
                f" {comma / on:>8.2f} {comma / max(lite_ms, 1e-3):>14.1f}"
            )
        total_comma = sum(r[0] for rows in by_k.values() for r in rows)
        total_on = sum(r[1] for rows in by_k.values() for r in rows)
        print(
            f"comma vs ON: all queries {total_comma:.0f} ms against {total_on:.0f} ms"
            f" ({total_comma / total_on:.2f}x); per query median"
            f" {statistics.median(ratios):.2f}x, largest {max(ratios):.2f}x (target: within 1.5)"
        )
        print(f"slowest query {worst:.1f} ms (target: under 100 ms)")
        print(
            f"refimpl/SQLite: median {statistics.median(lite_ratios):.1f}x,"
            f" largest {max(lite_ratios):.1f}x"
        )
        db.close()


if __name__ == "__main__":
    main()
