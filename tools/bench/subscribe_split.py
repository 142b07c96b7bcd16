"""`subscribe.py`'s split of a commit's CPU, the engine embedded in this process (no HTTP):
maintenance (the engine bringing maintained answers up to date, as it counts it) and delivery
(encoding the answers' server-sent events) of 10 subscriptions of one query, beside counts of
idle candle subscriptions of other symbols (`split`), and its table and checks against issue
37's 0.5 ms a commit (`print_split`). Imports refimpl when it runs: `subscribe.py` puts the
repository first on the path before.
"""

from __future__ import annotations

import datetime
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
from candle_query import CANDLES, TRADES
from subscribe_phase import SYMBOLS

GROUPED = (
    "SUBSCRIBE SELECT symbol, count(*) AS n, sum(price) AS total, max(price) AS high"
    " FROM trades GROUP BY symbol"
)
MICROS_PER_MINUTE = 60_000_000


def load_embedded(connection: Any, rows: int) -> int:
    """`rows` trades over the 1,000 symbols, spread over the day before a fixed moment (in
    bulk loads of 100,000); that moment, in microseconds."""
    from refimpl.engine.storage.values import TypedRows

    connection.execute(TRADES)
    database = connection.instance.database("demo")
    end = 1_790_000_000_000_000 // MICROS_PER_MINUTE * MICROS_PER_MINUTE
    step = max(1, 86_400_000_000 // max(1, rows // len(SYMBOLS)))
    made = 0
    while made < rows:
        chunk = TypedRows(("TIMESTAMP", "SYMBOL", "DOUBLE"))
        for k in range(made, min(rows, made + 100_000)):
            at = end - 86_400_000_000 + (k // len(SYMBOLS)) * step + k % 1000
            chunk.append((at, SYMBOLS[k % len(SYMBOLS)], float(100 + k % 13)))
        loaded = database.load_rows("trades", chunk)
        if loaded is None:  # the ordinary way (never for this table, but say so if it is)
            raise SystemExit("the bulk load of the benchmark's rows was refused")
        database.wait_durable(loaded[1])
        made += len(chunk)
    return end


def split(rows: int, idle_counts: list[int], commits: int) -> list[dict[str, Any]]:
    """Per commit: the INSERT's CPU, maintenance and delivery of the 10 subscriptions of
    each query, beside each count of idle subscriptions; medians and p99 in microseconds."""
    import refimpl
    from refimpl.engine.options import EngineOptions
    from refimpl.http.endpoints.subscribe_route import encode_reply

    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        # A loaded machine may take long to read a million rows: not a timeout's business.
        options = EngineOptions(statement_timeout=600.0)
        connection = refimpl.connect(Path(folder) / "data", options=options)
        try:
            began = time.monotonic()
            end = load_embedded(connection, rows)
            print(f"  {rows:,} trades loaded in {time.monotonic() - began:.1f} s", flush=True)
            manager = connection.instance.subscriptions
            asker, writer = connection.session(), connection.session()
            watched = SYMBOLS[0]
            candle = CANDLES.format(symbol=watched)
            idle: list[str] = []
            moment = end
            for count in idle_counts:
                for symbol in SYMBOLS[1 + len(idle) : 1 + count]:
                    manager.ask_now(asker, CANDLES.format(symbol=symbol), None)
                    idle.append(symbol)
                for name, text in (("candle", candle), ("group by symbol", GROUPED)):
                    ids = [manager.ask_now(asker, text, None).id for _ in range(10)]
                    figures: dict[str, list[float]] = {
                        "commit": [],
                        "maintenance": [],
                        "delivery": [],
                        "total": [],
                    }
                    for _ in range(commits):
                        moment += 1_000_000
                        price = round(random.uniform(90, 120), 2)
                        cpu = time.thread_time()
                        writer.execute(
                            f"INSERT INTO trades VALUES ('{_iso(moment)}', '{watched}', {price})"
                        )
                        committed = time.thread_time()
                        kept = manager.maintenance_cpu_seconds
                        delivery = 0.0
                        for at, ident in enumerate(ids):
                            reply = manager.ask_now(asker, text, ident)
                            ids[at] = reply.id
                            encoding = time.thread_time()
                            encode_reply(reply)
                            delivery += time.thread_time() - encoding
                        done = time.thread_time()
                        maintenance = (manager.maintenance_cpu_seconds - kept) * 1e6
                        figures["commit"].append((committed - cpu) * 1e6)
                        figures["maintenance"].append(maintenance)
                        figures["delivery"].append(delivery * 1e6)
                        figures["total"].append((done - committed) * 1e6)
                    summary = {
                        key: (statistics.median(v), harness.percentile(v, 0.99))
                        for key, v in figures.items()
                    }
                    out.append(
                        {
                            "rows": rows,
                            "idle": count,
                            "query": name,
                            **summary,
                            "load": os.getloadavg()[0],
                        }
                    )
        finally:
            connection.close()
    return out


def _iso(micros: int) -> str:
    moment = datetime.datetime.fromtimestamp(micros / 1e6, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def print_split(results: list[dict[str, Any]], commits: int) -> list[harness.Check]:
    """The table of `split` results; the checks of maintenance against its target."""
    harness.print_table(
        (
            "rows",
            "idle subs",
            "query (10 subs)",
            "maint. p50 us",
            "maint. p99 us",
            "delivery p50 us",
            "asks+delivery p50 us",
            "INSERT p50 us",
            "load avg",
        ),
        [
            (
                f"{r['rows']:,}",
                r["idle"],
                r["query"],
                r["maintenance"][0],
                r["maintenance"][1],
                r["delivery"][0],
                r["total"][0],
                r["commit"][0],
                r["load"],
            )
            for r in results
        ],
        title=f"CPU per commit of one trade, {commits} commits, engine in this process"
        " (maintenance: bringing the answer up to date; delivery: encoding the 10 answers)",
    )
    checks = []
    for name in ("candle", "group by symbol"):
        worst = max(r["maintenance"][0] for r in results if r["query"] == name)
        checks.append(
            harness.Check(
                f"maintenance per commit, {name}, worst median over sizes and idle subs (ms)",
                worst / 1000,
                "< 0.5 ms",
                worst < 500,
            )
        )
    return checks
