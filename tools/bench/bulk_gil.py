"""How long a woken thread waits for the interpreter lock while an import runs, without the
machine's wait for a CPU: a figure a busy machine leaves mostly alone, unlike the round trips
of `bulk_load.py`.

In one process per checkout and run (the runs alternate between the --code checkouts, as in
`bulk_steps.py`), the main thread imports --rows rows of the CSV that `bulk_load.py` sends,
as POST /imp does (`csvimport.CsvImport`, then `Database.load_rows`, the collector paused
and set as `refimpl serve` sets it), while a probe thread, every 10 ms, sleeps three times
0.2 ms, as a request wakes about three times (its bytes arrived, its turn, its answer sent).
Each wake needs the lock back from the importing thread. A probe's lock wait is its time
beyond the three sleeps and their timer slack (as measured on the idle process) and beyond
its own wait for a CPU (the kernel's schedstat). Printed per checkout, the median over runs
of the probes' p50 and p99 during the CSV conversion and during the load, and the import's
rows a second and thread CPU.

    python tools/bench/bulk_gil.py --code ../old --code .
    python tools/bench/bulk_gil.py --switch 0.0002      # another switch interval, both sides
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

import harness
from rev import TRADES

WAKES = 3
NAP = 0.0002  # seconds of each sleep


def _queued_ms() -> float:
    """This thread's time ready to run but waiting for a CPU (schedstat), milliseconds."""
    with open("/proc/thread-self/schedstat") as file:
        return int(file.read().split()[1]) / 1e6


def _probe(stop: threading.Event, out: list[tuple[float, float, float]]) -> None:
    """(started, wall ms of the wakes, ms of it waiting for a CPU) every 10 ms until `stop`."""
    while not stop.is_set():
        time.sleep(0.01)
        queued, began = _queued_ms(), time.monotonic()
        for _ in range(WAKES):
            time.sleep(NAP)
        out.append((began, (time.monotonic() - began) * 1000, _queued_ms() - queued))


def child(rows: int, switch: float) -> None:
    """Import with this process's refimpl while the probe runs; print the figures as JSON."""
    from refimpl.engine.instance import Instance
    from refimpl.engine.result import Column
    from refimpl.engine.storage import bulk, values
    from refimpl.http import csvimport

    sys.setswitchinterval(switch)
    body = harness.trades_csv(rows)
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)  # as `refimpl serve` sets it
    columns = [
        Column("time", "TIMESTAMP"),
        Column("symbol", "SYMBOL"),
        Column("price", "DOUBLE"),
        Column("qty", "BIGINT"),
    ]
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder) / "data")
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            session.execute("INSERT INTO trades VALUES (now(), 'S001', 100.0, 1)", ())
            idle: list[tuple[float, float, float]] = []
            stop = threading.Event()
            probe = threading.Thread(target=_probe, args=(stop, idle))
            probe.start()
            time.sleep(1.0)
            stop.set()
            probe.join()
            busy: list[tuple[float, float, float]] = []
            stop = threading.Event()
            probe = threading.Thread(target=_probe, args=(stop, busy))
            probe.start()
            began, cpu = time.monotonic(), time.thread_time()
            rows_in = csvimport.CsvImport(io.BytesIO(body), columns, "trades")
            parsed = values.TypedRows((c.type for c in columns), columns=(c.name for c in columns))
            # As POST /imp converts and loads (a checkout without quick switches: none).
            quick = getattr(bulk, "quick_switches", contextlib.nullcontext)
            with bulk.collector_paused(), quick():
                for batch in rows_in.batches():
                    parsed += batch
                converted = time.monotonic()
                loaded = session.database.load_rows("trades", parsed)
                bulk.freeze_if_many(len(parsed))
            ended, cpu = time.monotonic(), time.thread_time() - cpu
            stop.set()
            probe.join()
            assert loaded is not None, "the rows did not load by the bulk path"
        instance.close()
    # The sleeps' own length with their timer slack, from the idle process.
    base = statistics.median(ms - queued for _, ms, queued in idle)

    def waits(low: float, high: float) -> dict[str, float]:
        spans = [max(0.0, ms - base - q) for at, ms, q in busy if low <= at < high]
        return {k: v for k, v in harness.summary(spans).items() if k in ("n", "p50", "p99")}

    print(
        json.dumps(
            {
                "converting": waits(began, converted),
                "loading": waits(converted, ended),
                "rows_s": rows / (ended - began),
                "cpu_s": cpu,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=300_000, help="rows of the import")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is printed")
    parser.add_argument("--code", action="append", type=Path, help="a checkout to measure")
    parser.add_argument(
        "--switch", type=float, default=0.0005, help="the switch interval (serve's: 0.0005)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rows, args.switch)
        return
    codes: list[Path] = list(args.code or [harness.REPO])
    results = harness.alternate_children(
        __file__, codes, args.runs, ["--rows", str(args.rows), "--switch", str(args.switch)]
    )
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    table = []
    for code, runs in results.items():
        table.append(
            (
                str(code),
                *(
                    statistics.median(run[phase][what] for run in runs)
                    for phase in ("converting", "loading")
                    for what in ("p50", "p99")
                ),
                statistics.median(run["rows_s"] for run in runs),
                statistics.median(run["cpu_s"] for run in runs),
            )
        )
    harness.print_table(
        (
            "checkout",
            "converting p50",
            "p99",
            "loading p50",
            "p99",
            "import rows/s",
            "import CPU s",
        ),
        table,
        title=f"the lock wait of {WAKES} wakes during an import of {args.rows:,} rows, ms"
        f" (switch interval {args.switch * 1000:g} ms), median of {args.runs} run(s);"
        f" load average at the end {load}",
    )


if __name__ == "__main__":
    main()
