"""`changes_read.py`'s report of the reads: the medians of the rounds against PostgreSQL's
(rows/s, server and client CPU a row, run-queue wait a row) with their checks, and this code
beside `--before`'s."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import harness
from changes_reading import Reading


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _median(readings: list[Reading], field: str) -> float:
    return statistics.median(getattr(r, field) for r in readings)


def print_reads(
    ours: dict[str, list[Reading]],
    peer: dict[str, list[Reading]],
    whole: list[Reading],
    rows: int,
    rounds: int,
) -> list[harness.Check]:
    """Prints the table of the reads (the medians of the rounds, `whole`: PostgreSQL's one
    peek of every row, once a round); their checks: changes() at least 0.5x PostgreSQL's
    rows/s, each page of /api/changes 1.2x, with their CPU a row and their ratio to the one
    peek beside them."""
    table = []
    checks = []
    one_read = _median(whole, "rate")
    for label, mine in ours.items():
        theirs = peer[label]
        ratios = [m.rate / t.rate for m, t in zip(mine, theirs, strict=True)]
        ratio = statistics.median(ratios)
        rate, peer_rate = _median(mine, "rate"), _median(theirs, "rate")
        server, peer_server = _median(mine, "server_us"), _median(theirs, "server_us")
        embedded = label.startswith("changes()")
        # Clock ticks (10 ms): a short read may take none of the peer's.
        cpu_ratio = float("nan") if embedded or not peer_server else server / peer_server
        table.append(
            (
                label,
                rate,
                peer_rate,
                ratio,
                f"{min(ratios):.2f}-{max(ratios):.2f}",
                float("nan") if embedded else server,
                peer_server,
                cpu_ratio,
                float("nan") if embedded else _median(mine, "client_us"),
                _median(theirs, "client_us"),
                float("nan") if embedded else _median(mine, "runq_us"),
                _median(theirs, "runq_us"),
                float("nan") if embedded else rate / one_read,
            )
        )
        target = 0.5 if embedded else 1.2
        checks.append(
            harness.Check(
                f"{label} rows/s / PostgreSQL",
                ratio,
                f">= {target}x",
                ratio >= target,
                ours=rate,
                peer=peer_rate,
            )
        )
        if not embedded:
            checks.append(
                harness.Check(
                    f"{label} server CPU/row / PostgreSQL backend's",
                    cpu_ratio,
                    ours=server,
                    peer=peer_server,
                )
            )
            checks.append(
                harness.Check(
                    f"{label} rows/s / PostgreSQL's one peek of all rows",
                    rate / one_read,
                    ours=rate,
                    peer=one_read,
                )
            )
    harness.print_table(
        (
            "reader (medians of the rounds)",
            "rows/s",
            "PG rows/s",
            "x PG",
            "range",
            "server us/row",
            "PG backend us/row",
            "CPU/row x PG",
            "client us/row",
            "PG client us/row",
            "runq us/row",
            "PG runq us/row",
            "x PG one peek",
        ),
        table,
        title=f"reading {rows:,} logged changes, {rounds} rounds; at the end: {load()}",
    )
    return checks


def print_before(
    ours: dict[str, list[Reading]],
    peer: dict[str, list[Reading]],
    earlier: dict[str, list[Reading]],
    before: Path,
) -> None:
    """This code's reads beside `before`'s, round by round: medians, and the median of the
    rounds' own ratios (the two read the same rows in the same round, one after the
    other)."""
    table = []
    for label, then in earlier.items():
        now, theirs = ours[label], peer[label]
        ratios = [n.rate / t.rate for n, t in zip(now, then, strict=True)]
        cpu = [n.server_us / t.server_us for n, t in zip(now, then, strict=True) if t.server_us]
        table.append(
            (
                label,
                _median(now, "rate"),
                _median(then, "rate"),
                statistics.median(ratios),
                f"{min(ratios):.2f}-{max(ratios):.2f}",
                _median(now, "server_us"),
                _median(then, "server_us"),
                statistics.median(cpu) if cpu else float("nan"),
                statistics.median(n.rate / t.rate for n, t in zip(now, theirs, strict=True)),
                statistics.median(b.rate / t.rate for b, t in zip(then, theirs, strict=True)),
            )
        )
    harness.print_table(
        (
            "reader (medians of the rounds)",
            "rows/s",
            "before rows/s",
            "x before",
            "range",
            "server us/row",
            "before us/row",
            "CPU x before",
            "x PG",
            "before x PG",
        ),
        table,
        title=f"this code beside {before.name}'s, same rounds; at the end: {load()}",
    )
