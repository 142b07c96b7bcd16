"""The long differential run: refimpl against PostgreSQL 15 on generated queries (issue 33).

Starts a throwaway PostgreSQL 15 (Debian's binaries) and a `refimpl serve`, then runs
--queries queries (100,000 by default) drawn by the suite's strategies
(`tests/differential`), in rounds of data sets, each query on both servers. Prints the
figures as it goes and at the end: queries run, answers that agreed, differences by the
dialect choice of spec/sql.md that accounts for each, and every difference none does (the
query and both answers). Exit status 1 when there is any of those, 2 without PostgreSQL.

    python tools/differential.py                      # 100,000 queries
    python tools/differential.py --queries 5000 --seed 7
    python tools/differential.py --minutes 30         # stop after 30 minutes
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.differential.session import (  # noqa: E402
    Figures,
    connect_refimpl,
    differential_run,
    servers,
)

PER_EXAMPLE = 10  # queries over one data set
ROUND = 200  # data sets a round


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    figures = Figures()
    began = time.monotonic()
    with servers() as (postgres, why, refimpl_server):
        if postgres is None or refimpl_server is None:
            print(f"no PostgreSQL 15: {why}", file=sys.stderr)
            return 2
        theirs = postgres.connect()
        ours = connect_refimpl(refimpl_server)
        seed = args.seed
        while figures.queries < args.queries:
            if args.minutes is not None and time.monotonic() - began > args.minutes * 60:
                break
            differential_run(theirs, ours, ROUND, PER_EXAMPLE, figures, seed=seed)
            seed += 1
            _report(figures, time.monotonic() - began)
    _report(figures, time.monotonic() - began)
    for sql, pg, mine in figures.unexplained:
        print(f"\n{sql}\n  PostgreSQL: {pg}\n  refimpl:    {mine}")
    return 1 if figures.unexplained else 0


def _report(figures: Figures, seconds: float) -> None:
    choices = ", ".join(f"{k} {v}" for k, v in sorted(figures.explained.items())) or "none"
    print(
        f"{seconds:7.0f} s  queries {figures.queries}  agreed {figures.agreed} (both refused"
        f" {figures.errors_both})  documented differences: {choices}  undocumented:"
        f" {len(figures.unexplained)}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
