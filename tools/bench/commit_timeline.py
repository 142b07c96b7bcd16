"""The group commit's timeline under a one-row INSERT load over the PostgreSQL protocol.

A `PgServer` runs in this process on an engine instance in a throwaway folder; psycopg
clients in a child process (`--clients` threads, one connection each, `pg_opcodes`' client)
run `--runs` prepared one-row INSERTs each, every one its own commit. The bench wraps, on
this run's objects only (instance attributes shadowing the methods; the product's code is
unchanged), the log's `append`, `wait_durable`, `_lead` (one flush: the write and the
fsync) and its gather's wait, the database's durable-LSN publication, and the server's
hand-over of durable answers (the acknowledging thread's round, a worker's take), and stamps
each call. It prints:

- flushes: how many, how long each (write and fsync, the interpreter lock taken back
  included), how many commits each carries, and the share of the run the disk was busy;
  where the log has a gather (`wal_gather`), how long the leaders waited for their batches
  to fill and before how many of the flushes;
- commits: how long each waits from its append to the start of the flush that carries it,
  and to that flush's end (durable);
- **the disk idle while commits wait**: from a flush's end to the next flush's start, the
  part after the first commit that the next flush carries was appended (a commit waiting
  and no flush running), in all and a gap, split into its steps: the end of the flush to
  its answers handed back to the server (publication, the checkpoint's check), the end of
  that hand-back to the next flush's leader asking (`wait_durable`), and the ask to the
  flush's start (the gather, the log's lock);
- how long a round's hand-back takes (`on_round`: a post to the workers, or the sends
  themselves where the acknowledging thread sends), and, where workers send, the answers'
  pick-up: from their post to a worker's take.

PostgreSQL's group commit starts the next flush as soon as the last one ends when commits
wait (commit_delay 0): its idle-while-waiting is about nil. The wrappers' own cost (a few
microseconds a call) is in the figures; both trees of a comparison pay it alike:

    python tools/bench/commit_timeline.py --runs 1000
    PYTHONPATH=../before python tools/bench/commit_timeline.py --runs 1000
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import bisect
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer

pg_opcodes = sibling("pg_opcodes")


@dataclass
class Flush:
    """One flush of the log: when its leader asked, when it started and ended, and the
    LSNs it made durable (`first` to `target`)."""

    asked: float
    start: float
    end: float
    first: int
    target: int


@dataclass
class Stamps:
    """What the wrappers record while `on` is set (appends from one thread at a time: the
    write lock; the rest from the acknowledging thread and the workers)."""

    on: bool = False
    appends: list[tuple[float, int]] = field(default_factory=list)  # (time, LSN)
    flushes: list[Flush] = field(default_factory=list)
    published: list[float] = field(default_factory=list)
    gathers: list[float] = field(default_factory=list)  # each gather's seconds (a tree with one)
    posts: list[tuple[float, float]] = field(default_factory=list)  # on_round's start, end
    takes: list[tuple[float, int]] = field(default_factory=list)  # (time, answers taken)


def instrument(server: PgServer, instance: Instance, stamps: Stamps) -> None:
    """Wraps this run's log, database and server hand-overs to stamp their calls."""
    database = instance.database("demo")
    log: Any = database.log
    clock = time.perf_counter
    asked = threading.local()
    append, wait_durable, lead = log.append, log.wait_durable, log._lead

    def stamped_append(payload: Any, known: Any = None) -> int:
        lsn: int = append(payload, known)
        if stamps.on:
            stamps.appends.append((clock(), lsn))
        return lsn

    def stamped_wait(lsn: int) -> None:
        asked.at = clock()
        wait_durable(lsn)

    def stamped_lead(batch: Any, target: int) -> None:
        first, start = log.durable_lsn + 1, clock()
        try:
            lead(batch, target)
        finally:
            if stamps.on:
                stamps.flushes.append(Flush(asked.at, start, clock(), first, target))

    log.append, log.wait_durable, log._lead = stamped_append, stamped_wait, stamped_lead
    commits: Any = database.commits
    publish = commits.publish

    def stamped_publish(lsn: int) -> None:
        publish(lsn)
        if stamps.on:
            stamps.published.append(clock())

    commits.publish = stamped_publish
    gather: Any = getattr(log, "_gather", None)  # a tree whose leader sleeps has none
    if gather is not None:
        wait = gather.wait

        def stamped_gather(lock: Any, lsn: int, seconds: float) -> None:
            start = clock()
            wait(lock, lsn, seconds)
            if stamps.on:
                stamps.gathers.append(clock() - start)

        gather.wait = stamped_gather
    acknowledging: Any = server._acknowledging
    post = acknowledging._on_round

    def stamped_post(answers: list[Any]) -> None:
        start = clock()
        post(answers)
        if stamps.on:
            stamps.posts.append((start, clock()))

    acknowledging._on_round = stamped_post
    box: Any = getattr(server, "_durable", None)
    if box is None:  # the acknowledging thread sends the answers itself: no take
        return
    take = box.take

    def stamped_take() -> list[Any]:
        taken: list[Any] = take()
        if stamps.on and taken:
            stamps.takes.append((clock(), len(taken)))
        return taken

    box.take = stamped_take


def _us(values: list[float]) -> str:
    """Median, 90th percentile and max of `values` (seconds) in microseconds."""
    if not values:
        return "none"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"median {1e6 * statistics.median(ordered):7.0f} us, p90 {1e6 * p90:7.0f},"
        f" max {1e6 * ordered[-1]:7.0f}"
    )


def _steps(values: list[float], requests: int) -> str:
    """`_us(values)` and their sum a commit: a step's share of the idle time."""
    return f"{_us(values)}; {1e6 * sum(values) / requests:5.1f} us a commit"


def _after(times: list[float], moment: float) -> float | None:
    """The first of sorted `times` at or after `moment`; None when there is none."""
    i = bisect.bisect_left(times, moment)
    return times[i] if i < len(times) else None


def report(stamps: Stamps, requests: int, seconds: float) -> None:
    flushes = sorted(stamps.flushes, key=lambda flush: flush.start)
    appended = dict((lsn, at) for at, lsn in stamps.appends)
    if not flushes or not appended:
        raise SystemExit("no flush or no append was stamped")
    span = flushes[-1].end - flushes[0].start
    busy = sum(flush.end - flush.start for flush in flushes)
    carried = [flush.target - flush.first + 1 for flush in flushes]
    print(
        f"{requests} INSERTs in {seconds:.2f} s ({requests / seconds:,.0f}/s);"
        f" {len(flushes)} flushes, {statistics.mean(carried):.2f} commits a flush"
        f" (median {statistics.median(carried):.0f}, max {max(carried)});"
        f" disk busy {100 * busy / span:.0f}% of the span"
    )
    print(f"  flush (write + fsync)      {_us([f.end - f.start for f in flushes])}")
    if stamps.gathers:
        print(
            f"  gathers before a flush     {_us(stamps.gathers)};"
            f" {100 * len(stamps.gathers) / len(flushes):.0f}% of the flushes"
        )
    to_start: list[float] = []
    to_end: list[float] = []
    for flush in flushes:
        for lsn in range(flush.first, flush.target + 1):
            at = appended.get(lsn)
            if at is not None:
                to_start.append(flush.start - at)
                to_end.append(flush.end - at)
    print(f"  append -> its flush starts {_us(to_start)}")
    print(f"  append -> durable          {_us(to_end)}")
    posts = [at for at, _ in stamps.posts]
    handing = [end - start for start, end in stamps.posts]
    published = sorted(stamps.published)
    gaps: list[float] = []
    idle: list[float] = []
    to_post: list[float] = []
    post_to_ask: list[float] = []
    ask_to_start: list[float] = []
    to_publish: list[float] = []
    for last, flush in zip(flushes, flushes[1:], strict=False):
        gaps.append(flush.start - last.end)
        first_wait = appended.get(flush.first)
        if first_wait is None or first_wait >= flush.start:
            continue
        idle.append(flush.start - max(last.end, first_wait))
        at = _after(published, last.end)
        if at is not None and at <= flush.start:
            to_publish.append(at - last.end)
        i = bisect.bisect_left(posts, last.end)
        if i < len(posts) and stamps.posts[i][1] <= flush.asked:
            to_post.append(posts[i] - last.end)
            post_to_ask.append(flush.asked - stamps.posts[i][1])
        ask_to_start.append(flush.start - max(flush.asked, last.end))
    print(f"  flush end -> next start    {_us(gaps)}")
    print(
        f"  disk idle, commits waiting {_us(idle)}; in all {1e3 * sum(idle):.0f} ms,"
        f" {100 * sum(idle) / span:.0f}% of the span, {1e6 * sum(idle) / requests:.1f} us"
        " a commit"
    )
    print(f"    end -> durable published {_steps(to_publish, requests)}")
    print(f"    end -> answers handed    {_steps(to_post, requests)}")
    print(f"    handed back -> next ask  {_steps(post_to_ask, requests)}")
    print(f"    asks -> flush starts     {_steps(ask_to_start, requests)}")
    print(f"  a round's answers handed   {_us(handing)} (on_round: posted, or sent)")
    if stamps.takes:
        takes = [at for at, _ in stamps.takes]
        pick_up = [t - p for p in posts if (t := _after(takes, p)) is not None]
        print(f"  answers posted -> taken    {_us(pick_up)}")


def run(clients: int, runs: int, threads: int, stamps: Stamps) -> float:
    """The load, stamped from the clients' go to their end; its seconds."""
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        server: PgServer | None = None
        try:
            pg_opcodes.make_tables(instance.session("demo", Principal("admin", is_admin=True)))
            options = PgOptions(port=0, threads=threads, link=LinkOptions(dev=True))
            server = PgServer(instance, options)
            instrument(server, instance, stamps)
            server.start()
            command = [sys.executable, "-c", pg_opcodes.CLIENT, str(server.address[1])]
            command += ["insert", str(clients), str(runs)]
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert process.stdin is not None and process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise SystemExit("the clients did not start")
            stamps.on = True
            began = time.monotonic()
            process.stdin.write("go\n")
            process.stdin.flush()
            finished = process.stdout.readline().strip()
            seconds = time.monotonic() - began
            stamps.on = False
            process.wait()
            if finished != "done":
                raise SystemExit(f"the clients failed ({finished or 'no answer'})")
        finally:
            if server is not None:
                server.stop()
            instance.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1000, help="INSERTs per client")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--threads", type=int, default=16, help="server worker threads")
    args = parser.parse_args()
    stamps = Stamps()
    seconds = run(args.clients, args.runs, args.threads, stamps)
    report(stamps, args.clients * args.runs, seconds)


if __name__ == "__main__":
    main()
