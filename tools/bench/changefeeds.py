"""Changefeed options (spec: changefeeds): the initial copy beside writers, squash, and the
log bytes of before-images.

1. `initial=true` on a table of --rows rows (default 1,000,000, loaded through /imp) while
   one writer makes single-row commits through /exec: the writer's commit p50/p99 idle, then
   during the copy (pages of --page rows read as fast as one reader can), and the copy's
   rows per second. Target: p99 during the copy <= idle p99 + 10 ms.
2. Squash: 1,000 single-row commits updating one row as fast as one writer goes, read by a
   reader waiting on `/api/changes?squash=1` (each answer asked again from its `next`):
   how many answers, how many changes they held, and that the last row is right.
3. The bytes an UPDATE of one 10-column row adds to the log, with and without
   `REPLICA IDENTITY FULL` (the record as the engine encodes it).

    python tools/bench/changefeeds.py              # full: 1,000,000 rows
    python tools/bench/changefeeds.py --quick      # 100,000 rows
"""

from __future__ import annotations

import argparse
import threading
import time

import harness
import requests

from refimpl.engine.storage import records


def _load(server: harness.RefimplServer, rows: int) -> None:
    server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    chunk = 200_000
    for start in range(0, rows, chunk):
        lines = ["id,v,s"] + [f"{i},{i * 0.5},s{i % 97}"
                              for i in range(start, min(rows, start + chunk))]
        server.import_csv("t", "\n".join(lines) + "\n")


def _writer(server: harness.RefimplServer, stop: threading.Event, samples: list[float],
            base: int) -> None:  # fmt: skip
    client = harness.LeanHTTP(server.url, server.headers)
    n = 0
    while not stop.is_set():
        body = f"UPDATE t SET v = {n} WHERE id = {(base + n * 7919) % 1000}".encode()
        started = time.perf_counter()
        status, _, _ = client.request("POST", "/exec", body)
        samples.append((time.perf_counter() - started) * 1000)
        assert status == 200
        n += 1
    client.close()


def initial_copy(server: harness.RefimplServer, rows: int, page: int, idle_s: float) -> None:
    stop = threading.Event()
    idle: list[float] = []
    thread = threading.Thread(target=_writer, args=(server, stop, idle, 0))
    thread.start()
    time.sleep(idle_s)
    stop.set()
    thread.join()
    during: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(target=_writer, args=(server, stop, during, 1))
    thread.start()
    session = requests.Session()
    params: dict[str, object] = {"table": "t", "format": "json", "initial": "true",
                                 "limit": page}
    copied = 0
    started = time.perf_counter()
    while True:
        answer = session.get(f"{server.url}/api/changes", params=params,
                             headers=server.headers, timeout=600).json()
        copied += sum(1 for c in answer["changes"] if c.get("op") == "initial")
        if not answer["more"]:
            break
        params["from"] = answer["next"]
    seconds = time.perf_counter() - started
    stop.set()
    thread.join()
    idle_p99 = harness.percentile(idle, 0.99)
    during_p99 = harness.percentile(during, 0.99)
    harness.print_table(
        ["phase", "commits", "p50 ms", "p99 ms"],
        [["idle", len(idle), harness.percentile(idle, 0.5), idle_p99],
         ["during the copy", len(during), harness.percentile(during, 0.5), during_p99]],
        title=f"initial=true on {rows:,} rows, pages of {page:,}: {copied:,} rows in"
              f" {seconds:.1f} s = {copied / seconds:,.0f} rows/s",
    )
    harness.print_checks([
        harness.Check("copy: rows per second", copied / seconds),
        harness.Check("writers' commit p99 during the copy (ms)", during_p99,
                      f"<= {idle_p99 + 10:.1f}", during_p99 <= idle_p99 + 10),
    ])


def squash(server: harness.RefimplServer, commits: int) -> None:
    server.sql("CREATE TABLE one (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL")
    server.sql("INSERT INTO one VALUES (1, 0)")
    start = server.sql("SELECT max(lsn) FROM changes('one')")["dataset"][0][0]
    answers: list[int] = []
    last: list[dict] = []
    done = threading.Event()

    def read() -> None:
        session = requests.Session()
        position = start
        while True:
            answer = session.get(f"{server.url}/api/changes", params={
                "table": "one", "format": "json", "squash": "1", "from": position,
                "wait": 5000}, headers=server.headers, timeout=60).json()
            if answer["changes"]:
                answers.append(len(answer["changes"]))
                last[:] = answer["changes"]
            position = answer["next"]
            if done.is_set() and not answer["more"] and last and last[-1]["row"]["v"] == commits:
                return

    reader = threading.Thread(target=read)
    reader.start()
    client = harness.LeanHTTP(server.url, server.headers)
    started = time.perf_counter()
    for n in range(1, commits + 1):
        client.request("POST", "/exec", f"UPDATE one SET v = {n}".encode())
    seconds = time.perf_counter() - started
    done.set()
    reader.join(60)
    client.close()
    harness.print_table(
        ["commits", "seconds", "answers", "changes in them", "last row"],
        [[commits, seconds, len(answers), sum(answers), last[-1]["row"] if last else None]],
        title="squash=1, one reader waiting on /api/changes (target: at most 2 answers)",
    )


def log_bytes() -> None:
    columns = [f"c{i}" for i in range(10)]
    old = tuple(range(1_000_000, 1_000_010))
    new = (*old[:9], 7)
    plain = records.encode(0, [records.Entry.upsert("t", columns, [new], None)])
    full = records.encode(0, [records.Entry.upsert("t", columns, [new], None, [old])])
    delete_plain = records.encode(0, [records.Entry.delete("t", [((), (old[0],))])])
    delete_full = records.encode(0, [records.Entry.delete("t", [((), (old[0],))],
                                                          (columns, [old]))])
    harness.print_table(
        ["change of one 10-column row", "DEFAULT bytes", "FULL bytes"],
        [["UPDATE", len(plain), len(full)], ["DELETE", len(delete_plain), len(delete_full)]],
        title="log record bytes (before the log's framing)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, default=10_000)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows")
    options = parser.parse_args()
    rows = 100_000 if options.quick else options.rows
    log_bytes()
    with harness.RefimplServer() as server:
        _load(server, rows)
        initial_copy(server, rows, options.page, options.idle_seconds)
        squash(server, options.commits)


if __name__ == "__main__":
    main()
