"""Figures and their report: percentiles, a sample's summary, a plain text table, and
`Check`s (a figure against its target) printed in the same columns by every script."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple


def percentile(samples: Sequence[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(samples: Sequence[float]) -> dict[str, float]:
    """count, p50, p99 and max of samples (in their own unit)."""
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {
        "n": len(ordered),
        "p50": percentile(ordered, 0.5),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1],
    }


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """A plain text table: the first column left-aligned, the others right-aligned."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            if value != value:
                return "-"
            if abs(value) >= 100:
                return f"{value:,.0f}"
            if abs(value) >= 10:
                return f"{value:.1f}"
            return f"{value:.2f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if title:
        print(title)
    print(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    )
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print()


class Check(NamedTuple):
    """A figure and, where an issue sets one, its target and whether the run met it.

    `ours` and `peer` are the two raw figures a ratio was taken of, where the figure is one
    (refimpl's and PostgreSQL's rows/s, say): `compare.py` shows them beside the ratio.
    """

    label: str
    value: float
    target: str = ""
    met: bool = False
    ours: float | None = None
    peer: float | None = None


CHECKS_FILE_VARIABLE = "REFIMPL_BENCH_CHECKS"
"""When set, `print_checks` also appends each figure as one JSON line to the file it names
(`compare.py` collects every script's figures this way; a `KDB_` name would be taken for a
server setting)."""


def print_checks(checks: Sequence[Check]) -> None:
    """One line a figure, in the same columns in every script, then a blank line."""
    for check in checks:
        line = f"{check.label:58} {check.value:10.2f}"
        if check.target:
            line += f"   target {check.target:14} {'MET' if check.met else 'MISSED'}"
        print(line)
    print()
    record = os.environ.get(CHECKS_FILE_VARIABLE)
    if record:
        script = Path(sys.argv[0]).stem
        with open(record, "a", encoding="utf-8") as out:
            for check in checks:
                out.write(json.dumps({"script": script, **check._asdict()}) + "\n")
