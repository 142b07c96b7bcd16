"""Other writers and /api/rev while a bulk /imp loads: do they wait for it?

One server (32 threads). A prober asks GET /api/rev every 10 ms (over a plain keep-alive
socket, `harness.LeanHTTP`; `--probe requests` as before), and a writer commits one
single-row INSERT every 20 ms (into the same table, over /exec), first for --idle seconds
with nothing else running, then while one POST /imp of --rows rows (default 1,000,000; one
request, one transaction) loads. Printed per run and as the median of --runs runs: the
writer's commit round trip p50/p99/max and /api/rev's round trip p50/p99, idle and during
the import, and the import's time and rows a second. With --code given more than once, the
runs alternate between those checkouts (each one's refimpl serves its runs), and each gets
its own table. With --pin the server runs on the first CPU alone and the bench's processes
(prober, writer, importer) on the others, as `stream.py` pins its readers: then a round trip
is the server's delay, not the wait of a client that the server kept off its core.

Side by side, like is compared with like: each checkout first serves --warmup runs that are
printed but not counted (the machine's first imports, its caches, the checkouts' first
starts), and the measured runs go in pairs whose order turns at each pair (A B, B A, A B,
...), so that neither side always runs first. With two or more checkouts, the medians of
the runs that went first in their pair and of those that went second are printed too: a
difference there is the order's, not the code's (without the warm-up and the turns, the
side that ran first was worse in every run of a quiet machine's measure, whichever it was).

Targets (issue 37): during a 1,000,000-row /imp, a commit's p99 under 100 ms and max under
500 ms, /api/rev's p99 under 5 ms. On a busy machine the round trips mostly measure the
machine (compare the idle rows); `bulk_steps.py` measures what the load itself makes others
wait for, in CPU time.

    python tools/bench/bulk_load.py                 # 3 runs of 1,000,000 rows
    python tools/bench/bulk_load.py --rows 200000 --runs 1
    python tools/bench/bulk_load.py --code ../old --code .   # an older checkout beside this
    python tools/bench/bulk_load.py --pin                    # clients off the server's CPU
    python tools/bench/bulk_load.py --warmup 0 --runs 1      # quick: no warm-up run
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bulk_why
import harness
import requests
from rev import TRADES, _importer, _prober_until, now_text

PROBE_TARGET = "/api/rev?table=trades&symbol=S001"


def _lean_prober_until(target: dict[str, Any], stop_flag: Any, queue: Any) -> None:
    """`rev._prober_until` through `harness.LeanHTTP` instead of `requests`: the same
    request every 10 ms, the same samples (start, round trip ms, server ms).

    `requests` spends about 1 ms of the prober's CPU on each /api/rev (2.7 ms round trip
    against 0.6 ms over a plain socket, idle), which is the client's time and, during an
    import, a wait of the client for the CPU the server shares; this measures the server."""
    client = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    samples = []
    while time.monotonic() < stop_flag.value:
        began = time.monotonic()
        try:
            status, headers, _ = client.request("GET", PROBE_TARGET)
            if status == 200:
                took = (time.monotonic() - began) * 1000
                samples.append((began, took, _server_ms(headers.get("server-timing", ""))))
        except OSError:
            client.close()
        time.sleep(max(0.0, began + 0.01 - time.monotonic()))
    queue.put(samples)


def _server_ms(timing: str) -> float:
    """The handling time a Server-Timing header's `dur=` gives (as `rev.server_ms`)."""
    for part in timing.split(","):
        for item in part.split(";"):
            if item.strip().startswith("dur="):
                return float(item.strip()[4:])
    return float("nan")


def _committer(server: harness.RefimplServer, done: threading.Event, out: list[Any]) -> None:
    session = requests.Session()
    headers = {**server.headers, "Content-Type": "text/plain"}
    k = 0
    while not done.is_set():
        began = time.monotonic()
        sql = f"INSERT INTO trades VALUES ('{now_text()}', 'S{k % 100:03d}', 99.5, 1)"
        try:
            answer = session.post(
                f"{server.url}/exec", data=sql.encode(), headers=headers, timeout=120
            )
            ok = answer.status_code == 200
        except requests.RequestException:
            ok = False
        # A failed commit counts with the time it took (a statement timeout's, say).
        out.append((began, (time.monotonic() - began) * 1000, ok))
        k += 1
        time.sleep(max(0.0, began + 0.02 - time.monotonic()))


def one_run(
    rows: int,
    idle_seconds: float,
    code: Path | None = None,
    why: Path | None = None,
    pin: bool = False,
    probe: str = "lean",
) -> dict[str, float]:
    """One server (of the checkout `code`, this one's by default), one import: the figures
    of this run (milliseconds, and seconds). With `why`, the server records there what
    `bulk_why.explain` needs, and it is printed; with `pin`, the server and the bench run on
    CPUs of their own (`harness.pin_apart`)."""
    launcher = bulk_why.LAUNCHER if why is not None else None
    everywhere = os.sched_getaffinity(0)
    with harness.RefimplServer(threads=32, code=code, profile=why, launcher=launcher) as server:
        if pin:
            harness.pin_apart(server)
        server.sql(TRADES)
        server.sql(f"INSERT INTO trades VALUES ('{now_text()}', 'S001', 100.0, 1)")
        target = {"url": server.url, "token": server.token}
        context = multiprocessing.get_context("fork")
        importer_queue = context.Queue()
        go = context.Event()
        importer = context.Process(target=_importer, args=(target, rows, go, importer_queue))
        importer.start()
        assert importer_queue.get(timeout=600)[0] == "ready"  # the CSV is built
        probe_queue = context.Queue()
        stop_flag = context.Value("d", time.monotonic() + 4 * 3600)
        probing = _lean_prober_until if probe == "lean" else _prober_until
        prober = context.Process(target=probing, args=(target, stop_flag, probe_queue))
        prober.start()
        commits: list[Any] = []
        done = threading.Event()
        writer = threading.Thread(target=_committer, args=(server, done, commits))
        writer.start()
        time.sleep(idle_seconds)
        go.set()
        status = importer_queue.get(timeout=4 * 3600)
        while status[0] != "done":
            status = importer_queue.get(timeout=4 * 3600)
        _, began, ended, code, text = status
        done.set()
        writer.join()
        with stop_flag.get_lock():
            stop_flag.value = 0.0
        samples = probe_queue.get(timeout=120)
        prober.join(30)
        importer.join(30)
    os.sched_setaffinity(0, everywhere)
    if code != 200:
        raise SystemExit(f"/imp answered {code}: {text}")
    if why is not None:
        bulk_why.explain(samples, why, began, ended)
    failed = sum(1 for at, _, ok in commits if not ok and began <= at < ended)
    figures: dict[str, float] = {
        "import_s": ended - began,
        "import_rows_s": rows / (ended - began),
        "busy_commits_failed": failed,
    }
    for phase, low, high in (("idle", 0.0, began), ("busy", began, ended)):
        commit = harness.summary([ms for at, ms, _ in commits if low <= at < high])
        rev = harness.summary([s[1] for s in samples if low <= s[0] < high])
        figures |= {
            f"{phase}_commit_p50": commit["p50"],
            f"{phase}_commit_p99": commit["p99"],
            f"{phase}_commit_max": commit["max"],
            f"{phase}_rev_p50": rev["p50"],
            f"{phase}_rev_p90": harness.percentile(
                [s[1] for s in samples if low <= s[0] < high], 0.9
            ),
            f"{phase}_rev_p99": rev["p99"],
            f"{phase}_rev_max": rev["max"],
            # /api/rev's handling time in the server (Server-Timing): the rest of its round
            # trip is waiting for the interpreter lock or the CPU before and after it.
            f"{phase}_rev_server_p99": harness.summary(
                [s[2] for s in samples if low <= s[0] < high]
            )["p99"],
        }
    return figures


def pair_order(codes: list[Path | None], number: int) -> list[Path | None]:
    """The checkouts in the order they serve measured run `number` (from 1): as given in
    odd runs, reversed in even ones, so that each goes first as often as the others (A B,
    B A, A B, ...) and no side always follows the other's import."""
    return codes if number % 2 else codes[::-1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the bulk /imp")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is printed")
    parser.add_argument("--idle", type=float, default=3.0, help="idle seconds before the import")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="runs of each checkout before the measured ones, printed but not counted",
    )
    parser.add_argument(
        "--code",
        action="append",
        type=Path,
        help="a checkout whose refimpl serves; given again, the runs alternate between them",
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="print what each slow /api/rev probe waited for (see bulk_why.py)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server on the first CPU, the bench's processes on the others",
    )
    parser.add_argument(
        "--probe",
        choices=("lean", "requests"),
        default="lean",
        help="the /api/rev prober's client: a plain keep-alive socket (harness.LeanHTTP), or"
        " requests as before 2026-12-06 (about 1 ms of client CPU a probe more)",
    )
    args = parser.parse_args()
    codes: list[Path | None] = list(args.code or [None])
    runs: dict[Path | None, list[dict[str, float]]] = {code: [] for code in codes}
    # The measured runs by their place in their pair: 0 first, 1 second (and so on).
    by_place: dict[int, list[dict[str, float]]] = {place: [] for place in range(len(codes))}
    print(f"load average at the start: {_load()}")
    plan = [(f"warm-up {n}", codes) for n in range(1, args.warmup + 1)]
    plan += [(f"run {n}", pair_order(codes, n)) for n in range(1, args.runs + 1)]
    for label, order in plan:
        for place, code in enumerate(order):
            why = Path(tempfile.mkdtemp(prefix="bulk-why-")) / "events.json" if args.why else None
            figures = one_run(args.rows, args.idle, code, why, args.pin, args.probe)
            if label.startswith("run"):
                runs[code].append(figures)
                by_place[place].append(figures)
            name = "" if code is None else f" ({code})"
            print(
                f"{label}{name}, load {_load()}: "
                + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
            )
    for code, done in runs.items():
        _print_medians(args.rows, done, "this checkout" if code is None else str(code))
    if len(codes) > 1:
        _print_order(by_place)
    harness.print_checks(
        [
            check
            for code, done in runs.items()
            for check in _checks(args.rows, done, "" if code is None else f"{code}: ")
        ]
    )


def _print_medians(rows: int, runs: list[dict[str, float]], name: str) -> None:
    table = []
    for phase, label in (("idle", "idle server"), ("busy", f"during /imp of {rows:,} rows")):
        table.append(
            (
                label,
                *(statistics.median(run[f"{phase}_{what}"] for run in runs) for what in _COLUMNS),
            )
        )
    harness.print_table(
        ("median of runs", *(what.replace("_", " ") for what in _COLUMNS)),
        table,
        title=f"{name}: milliseconds, median of {len(runs)} run(s); the import took"
        f" {statistics.median(run['import_s'] for run in runs):.1f} s,"
        f" {statistics.median(run['import_rows_s'] for run in runs):,.0f} rows/s (medians)",
    )


_COLUMNS = (
    "commit_p50",
    "commit_p99",
    "commit_max",
    "rev_p50",
    "rev_p90",
    "rev_p99",
    "rev_max",
    "rev_server_p99",
)


# Issue 37's targets during the import: another writer's commit p99 and max, and /api/rev's
# round trip p99 (milliseconds, medians of the runs).
_TARGETS = (
    ("commit_p99", "another writer's commit p99", 100),
    ("commit_max", "another writer's commit max", 500),
    ("rev_p99", "/api/rev round trip p99", 5),
)


def _checks(rows: int, runs: list[dict[str, float]], name: str) -> list[harness.Check]:
    checks = []
    for what, label, bound in _TARGETS:
        value = statistics.median(run[f"busy_{what}"] for run in runs)
        checks.append(
            harness.Check(
                f"{name}{label} during a {rows:,}-row /imp (ms)",
                value,
                f"< {bound} ms",
                value < bound,
            )
        )
    return checks


def _print_order(by_place: dict[int, list[dict[str, float]]]) -> None:
    """The medians, during the import, of the runs by their place in their pair, whatever
    their checkout: with like compared with like they differ by noise only."""
    harness.print_table(
        ("place in its pair", "runs", *(what.replace("_", " ") for what in _COLUMNS), "rows/s"),
        [
            (
                "first" if place == 0 else f"{place + 1}th" if place > 1 else "second",
                len(done),
                *(statistics.median(run[f"busy_{what}"] for run in done) for what in _COLUMNS),
                statistics.median(run["import_rows_s"] for run in done),
            )
            for place, done in by_place.items()
            if done
        ],
        title="the order's check: milliseconds during the import, median of the runs at each"
        " place, all checkouts together",
    )


def _load() -> str:
    """The load averages over 1, 5 and 15 minutes, for beside the figures."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
