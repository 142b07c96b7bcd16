"""`changes_read.py`'s commit throughput through /exec with no reader and with 100 readers
waiting on /api/changes, each woken by every commit (issue 5's target: at least half)."""

from __future__ import annotations

import multiprocessing
import threading
import time

import harness
from changes_latency import reader_process


def commit_rate(
    server: harness.RefimplServer, seconds: float, first_id: int, writers: int = 4
) -> float:
    counts = [0] * writers
    stop_at = time.monotonic() + seconds

    def writer(index: int) -> None:
        client = harness.LeanHTTP(server.url, {**server.headers, "Content-Type": "text/plain"})
        ident = first_id + index * 10_000_000
        while time.monotonic() < stop_at:
            sql = f"INSERT INTO c VALUES ({ident}, {time.monotonic()!r})"
            status, _, body = client.request("POST", "/exec", sql.encode())
            if status != 200:
                raise RuntimeError(f"{status}: {body[:200]!r}")
            ident += 1
            counts[index] += 1
        client.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


def commits_with_readers(seconds: float, readers: int = 100) -> tuple[float, float, int]:
    with harness.RefimplServer(threads=512) as server:
        server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        alone = commit_rate(server, seconds, 0)
        start = str(server.stats()["databases"]["demo"]["durable_lsn"])
        target = {"kind": "refimpl", "url": server.url, "token": server.token}
        context = multiprocessing.get_context("fork")
        ready = context.Value("i", 0)
        queue = context.Queue()
        stop_at = time.monotonic() + seconds + 6.0
        procs = 4
        processes = [
            context.Process(
                target=reader_process, args=(target, readers // procs, start, ready, stop_at, queue)
            )
            for _ in range(procs)
        ]
        for process in processes:
            process.start()
        while ready.value < readers // procs * procs:
            time.sleep(0.05)
        time.sleep(2.0)  # every reader has asked and waits
        together = commit_rate(server, seconds, 100_000_000)
        results = [queue.get(timeout=seconds + 120) for _ in processes]
        for process in processes:
            process.join(30)
    events = sum(len(events) for events, _ in results)
    return alone, together, events


def writer_figures(seconds: float) -> None:
    alone, together, events = commits_with_readers(seconds)
    harness.print_table(
        ("single-row commits via /exec, 4 writers", "commits/s"),
        [("no reader", alone), ("100 SSE readers waiting", together)],
        title=f"commit throughput, {seconds:g} s per phase (server --threads 512);"
        f" readers received {events:,} events",
    )
    ratio = together / alone
    harness.print_checks(
        [harness.Check("with 100 waiting readers / with none", ratio, ">= 0.5x", ratio >= 0.5)]
    )
