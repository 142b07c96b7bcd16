"""/api/rev and the change stream while a long CALL holds the database (issue 19).

A procedure of K passes over a table of --rows rows (`UPDATE big SET v = v + 1`, K chosen
from a timed pass so that the CALL runs about --seconds, 10 by default) runs as one CALL. A
prober process asks GET /api/rev?table=big every 10 ms, and another reads
GET /api/changes?table=big from its last position every 50 ms; each records the round trip
and the server's own handling time (the `Server-Timing: app;dur=...` header): first with the
server idle, then during the CALL. Printed: p50, p99 and max of each, the CALL's seconds, and
the target of the issue (/api/rev p99 inside the server under 1 ms).

    python tools/bench/call_rev.py                   # 100,000 rows, a 10-second CALL
    python tools/bench/call_rev.py --seconds 3 --rows 20000
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import time
from typing import Any

import harness
import requests
from rev import server_ms


def _prober(target: dict[str, Any], path: str, every: float, stop_flag: Any, queue: Any) -> None:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {target['token']}"}
    params: dict[str, Any] = {"table": "big"}
    if path == "/api/changes":
        params.update({"from": 0, "format": "json", "limit": 100})
    samples = []
    while time.monotonic() < stop_flag.value:
        began = time.monotonic()
        try:
            response = session.get(target["url"] + path, params=params, headers=headers, timeout=60)
            if response.status_code == 200:
                samples.append((began, (time.monotonic() - began) * 1000, server_ms(response)))
                if path == "/api/changes":
                    params["from"] = response.json()["next"]
        except requests.RequestException:
            pass
        time.sleep(max(0.0, began + every - time.monotonic()))
    queue.put(samples)


def _timed(server: harness.RefimplServer, sql: str) -> float:
    began = time.monotonic()
    server.sql(sql)
    return time.monotonic() - began


def run(rows: int, seconds: float, idle: float) -> None:
    with harness.RefimplServer(
        threads=16, env={"KDB_STATEMENT_TIMEOUT_MS": str(int(max(60.0, seconds * 6) * 1000))}
    ) as server:
        server.sql("CREATE TABLE big (id INT PRIMARY KEY, v DOUBLE)")
        body = "".join(f"{i},{i / 7}\n" for i in range(rows)).encode()
        answer = requests.post(
            server.url + "/exec",
            params={"query": "COPY big FROM STDIN (FORMAT csv)"},
            data=body,
            headers={**server.headers, "Content-Type": "text/csv"},
            timeout=600,
        )
        answer.raise_for_status()
        one_pass = _timed(server, "UPDATE big SET v = v + 1")
        passes = max(1, math.ceil(seconds / one_pass))
        steps = " ".join("UPDATE big SET v = v + 1;" for _ in range(passes))
        server.sql(f"CREATE PROCEDURE slow() BEGIN ATOMIC {steps} END")
        context = multiprocessing.get_context("fork")
        stop_flag = context.Value("d", time.monotonic() + 24 * 3600)
        target = {"url": server.url, "token": server.token}
        probers = []
        for path, every in (("/api/rev", 0.01), ("/api/changes", 0.05)):
            queue = context.Queue()
            process = context.Process(target=_prober, args=(target, path, every, stop_flag, queue))
            process.start()
            probers.append((path, process, queue))
        time.sleep(idle)
        call_began = time.monotonic()
        server.sql("CALL slow()")
        call_ended = time.monotonic()
        time.sleep(0.5)
        with stop_flag.get_lock():
            stop_flag.value = 0.0
        results = []
        for path, process, queue in probers:
            samples = queue.get(timeout=120)
            process.join(30)
            results.append((path, samples))
    table = []
    checks = []
    for path, samples in results:
        groups = (
            ("idle", [s for s in samples if s[0] + s[1] / 1000 < call_began]),
            ("during the CALL", [s for s in samples if call_began <= s[0] <= call_ended]),
        )
        for phase, group in groups:
            rtt = harness.summary([s[1] for s in group])
            inside = harness.summary([s[2] for s in group])
            table.append(
                (
                    f"GET {path}, {phase}",
                    len(group),
                    rtt["p50"],
                    rtt["p99"],
                    rtt["max"],
                    inside["p50"],
                    inside["p99"],
                    inside["max"],
                )
            )
            if path == "/api/rev" and phase != "idle":
                checks.append(
                    harness.Check(
                        "/api/rev p99 inside the server during the CALL, ms",
                        inside["p99"],
                        "< 1 ms",
                        inside["p99"] < 1.0,
                    )
                )
                checks.append(
                    harness.Check("/api/rev p99 round trip during the CALL, ms", rtt["p99"])
                )
    harness.print_table(
        [
            "requests",
            "n",
            "rtt p50 ms",
            "rtt p99 ms",
            "rtt max ms",
            "server p50 ms",
            "server p99 ms",
            "server max ms",
        ],
        table,
        f"one CALL of {passes} passes over {rows:,} rows: {call_ended - call_began:.1f} s",
    )
    checks.append(harness.Check("CALL seconds", call_ended - call_began))
    harness.print_checks(checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the CALL runs")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds probed before it")
    args = parser.parse_args()
    run(args.rows, args.seconds, args.idle)


if __name__ == "__main__":
    main()
