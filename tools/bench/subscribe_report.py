"""`subscribe.py`'s report: the texts of a run's lines, each `--phases` run's line and the
medians of its rounds, issue 37's checks a phase measures (`phase_checks`: a p99 of trades
missing or wrong meets none) and the opcodes a commit by thread and function.
"""

from __future__ import annotations

import argparse
import math
import statistics
from typing import Any

import harness
from subscribe_phase import phase_subscriptions

Runs = list[dict[str, float]]  # the figures of a phase's rounds, one tree's


def waiters_text(args: argparse.Namespace) -> str:
    """Which waiters `args` run, for the output."""
    if not args.stream:
        return "long polls, 25 threads a process (4 processes)"
    if args.threaded_waiters:
        return "streams, 25 threads a process each parsing as it reads (--threaded-waiters)"
    return "streams, one thread a process (4 processes) reading 25, parsed after the run"


def arrived_text(figures: dict[str, float]) -> str:
    """The arrival percentiles of a phase's figures (streams only), for its line."""
    if "arrival p50" not in figures:
        return ""
    return (
        f" arrived p50 {figures['arrival p50']:.2f} ms, p99 {figures['arrival p99']:.2f} ms,"
        f" a commit's last {figures['last arrival p50']:.2f} ms,"
    )


def counted_text(figures: dict[str, float]) -> str:
    """A phase's instructions a commit (with --instructions), for its line."""
    if "instructions" not in figures:
        return ""
    return f" {figures['instructions']:,.0f} instructions a commit,"


def print_run(name: str, total: int, figures: dict[str, float]) -> None:
    """One `--phases` run's line and its server's CPU a commit by thread."""
    kept, kept_after = int(figures["kept"]), int(figures["kept after"])
    said = "" if kept == kept_after == total else f" ({kept:,}, then {kept_after:,} kept)"
    print(
        f"  {name} {total:,} subscriptions{said}: p50 {figures['p50']:.2f} ms, p99"
        f" {figures['p99']:.2f} ms,{arrived_text(figures)} CPU"
        f" {figures['cpu_ms']:.2f} ms a commit,{counted_text(figures)}"
        f" {figures['n']}/{figures['expected']} answers, {figures['wrong']:.0f}"
        f" wrong (load {figures['load']:.2f})",
        flush=True,
    )
    threads = [(k[7:], v) for k, v in figures.items() if k.startswith("thread ")]
    print(
        "    CPU ms a commit by thread (times run a commit): "
        + ", ".join(
            f"{k} {v:.2f} ({figures[f'runs {k}']:.1f})"
            for k, v in sorted(threads, key=lambda t: -t[1])
        ),
        flush=True,
    )


def median(got: Runs, key: str) -> float:
    return statistics.median(f[key] for f in got)


def medians_row(label: str, got: Runs, stream: bool) -> tuple[Any, ...]:
    """A row of `print_medians`: the medians of one tree's rounds of a phase."""
    return (
        label,
        median(got, "n"),
        median(got, "p50"),
        median(got, "p99"),
        median(got, "arrival p50") if stream else math.nan,
        median(got, "arrival p99") if stream else math.nan,
        median(got, "cpu_ms"),
        sum(f["errors"] for f in got),
        sum(f["wrong"] for f in got),
        median(got, "load"),
    )


def print_thread_medians(label: str, got: Runs) -> None:
    """One tree's server CPU a commit by thread, the medians of its rounds."""
    # A thread seen in some runs only (under 0.05 ms a commit in the others) counts 0 there.
    keys = sorted({k for f in got for k in f if k.startswith("thread ")})
    split = [
        (
            k[7:],
            statistics.median(f.get(k, 0.0) for f in got),
            statistics.median(f.get(f"runs {k[7:]}", 0.0) for f in got),
        )
        for k in keys
    ]
    split.sort(key=lambda t: -t[1])
    print(
        f"  {label}, medians, CPU ms a commit by thread (times run a commit): "
        + ", ".join(f"{k} {v:.2f} ({r:.1f})" for k, v, r in split),
        flush=True,
    )


def print_instructions(label: str, got: Runs) -> None:
    each = ", ".join(f"{f['instructions']:,.0f}" for f in got)
    print(
        f"  {label}: machine instructions a commit, median"
        f" {statistics.median(f['instructions'] for f in got):,.0f} ({each})",
        flush=True,
    )


def print_medians(rows: list[tuple[Any, ...]], title: str) -> None:
    harness.print_table(
        (
            "",
            "answers",
            "p50 ms",
            "p99 ms",
            "arrived p50",
            "arrived p99",
            "CPU ms/commit",
            "errors",
            "wrong",
            "load avg",
        ),
        rows,
        title=title,
    )


def whole(figures: dict[str, float]) -> bool:
    """Whether a phase's waiters got every trade they were to get, each once, in order and
    in its row (`TradeOrder`): a p99 of fewer or wrong trades meets no target."""
    return figures["n"] == figures["expected"] and figures["wrong"] == 0


def p99_check(label: str, p99: float, complete: bool) -> harness.Check:
    """The commit-to-rows p99 against issue 37's 10 ms, not met when the waiters' trades
    were not `complete` (`whole`)."""
    if not complete:
        return harness.Check(label, p99, "< 10 ms, every trade once, in order", False)
    return harness.Check(label, p99, "< 10 ms", p99 < 10)


def phase_checks(
    total: int,
    per_symbol: int,
    kind: str,
    rounds: int,
    p99: float,
    cpu_ms: float,
    *,
    complete: bool = True,
) -> list[harness.Check]:
    """Issue 37's live-query targets a phase of `--phases` measures, on this tree's medians
    over `rounds` runs: with 100 waiters (`kind`), the commit-to-rows p99 under 10 ms (not
    met unless every run's waiters got their trades `complete`: `whole`), the label saying
    how many a commit wakes; when each commit wakes 10, the server's CPU a commit under 3
    ms. None for another phase."""
    _, watched, symbols = phase_subscriptions(total, per_symbol)
    woken = len(watched) // len(symbols)
    checks = []
    if len(watched) == 100:
        checks.append(
            p99_check(
                f"commit-to-rows p99, {woken} of 100 {kind} woken, median of {rounds} (ms)",
                p99,
                complete,
            )
        )
    if len(watched) == 10 * len(symbols):
        checks.append(
            harness.Check(
                f"server CPU per commit waking 10 {kind}, {total:,} subscriptions, median"
                f" of {rounds} (ms)",
                cpu_ms,
                "< 3 ms",
                cpu_ms < 3,
            )
        )
    return checks


def print_opcodes(runs: dict[str, list[dict[str, float]]], top: int) -> None:
    """The Python opcodes a commit of each tree (medians over its runs): in all, by thread
    group, and the `top` functions of the last tree by their own, the others beside them."""
    medians: dict[str, dict[str, float]] = {}
    for name, got in runs.items():
        keys = {k[3:] for f in got for k in f if k.startswith("op ")}
        medians[name] = {k: statistics.median(f.get(f"op {k}", 0.0) for f in got) for k in keys}
    names = list(medians)
    groups: dict[str, dict[str, float]] = {}
    for name, counts in medians.items():
        for key, count in counts.items():
            group = key.split(" ", 1)[0]
            groups.setdefault(group, dict.fromkeys(names, 0.0))[name] += count
    rows = [("all", *(sum(medians[n].values()) for n in names))]
    rows += [
        (g, *(c[n] for n in names))
        for g, c in sorted(groups.items(), key=lambda i: -max(i[1].values()))
    ]
    last = medians[names[-1]]
    for key in sorted(last, key=lambda k: -last[k])[:top]:
        rows.append((key, *(medians[n].get(key, 0.0) for n in names)))
    harness.print_table(
        ("Python opcodes a commit", *names),
        [(r[0], *(f"{v:,.0f}" for v in r[1:])) for r in rows],
        title="opcodes a commit (medians of the runs): in all, by thread, top functions",
    )
