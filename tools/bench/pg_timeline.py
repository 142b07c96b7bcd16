"""Where a served one-row INSERT's latency goes, stage by stage (issue 37's protocol INSERT).

A `PgServer` runs in this process on an engine instance in a throwaway folder; psycopg
clients in child processes (`--procs` of them, `--clients` connections in all, as
`per_request.py` runs them) send prepared one-row INSERTs in a closed loop for `--seconds`
and note, per request, when they began to send and when the answer was read
(`time.monotonic_ns`: one clock for every process). The server is instrumented here, by
wrapping its objects' methods in this process (the product's code is unchanged), and notes
per request: when its worker's wait returned the event (`polled`), when it took the
connection up (`picked`), when its commit was handed to the acknowledging thread (`handed`),
when that thread took up the round it is in (`waiting`) and when its wait for the flush
returned (`durable`), when the round's answers were handed back to be sent (`posted`), when
its answer's sending began (`taken`) and ended (`sent`); and per flush, when it led (`_lead`,
after the gathering sleep) and how long the write took. Requests are matched to the
clients' by the connection's port and time.

Printed: the median and mean of each stage (a stage's end minus its start; a mean is pulled
by the few requests whose marks were matched to a neighbour's), the round trip as the client
saw it, how many requests the workers took up during the stage (a count, not a time: the
same on a loaded machine), and the flushes (commits each, write time, the time from one's
end to the next's lead). Wrapping costs a few microseconds a stage: compare stages with each
other and two trees with each other (the script copied into each tree's tools/bench and run
from there, alternately), not with an unwrapped rate.

    python tools/bench/pg_timeline.py --seconds 4
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import bisect
import collections
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer

pg_opcodes = sibling("pg_opcodes")
now = time.monotonic_ns

# Each client process: `clients` connections (numbered from `first`), INSERTs in a closed
# loop from the go until the stop; then it prints, per request, "port send_ns done_ns".
CLIENT = r"""
import os, socket, sys, threading, time, psycopg
port, first, clients, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
now = time.monotonic_ns
go = threading.Event()
lines = []
def client(number, ready):
    conninfo = f"host=127.0.0.1 port={port} user=admin dbname=demo"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        with socket.socket(fileno=os.dup(conn.fileno())) as own:  # closes the copy only
            local = own.getsockname()[1]
        key = (first + number + 1) * 10**9
        for i in range(20):
            conn.execute("INSERT INTO w VALUES (%s, %s, %s)", (-key - i, 0.5, "x"), prepare=True)
        ready.release()
        go.wait()
        stop = now() + int(seconds * 1e9)
        mine = []
        while (began := now()) < stop:
            key += 1
            conn.execute("INSERT INTO w VALUES (%s, %s, %s)", (key, 0.5, "x"), prepare=True)
            mine.append((local, began, now()))
        lines.extend(mine)
"""
CLIENT += (
    pg_opcodes.CLIENT_TAIL + 'print("\\n".join(f"{p} {a} {b}" for p, a, b in lines), flush=True)\n'
)

# The stages in order: each the time from the mark before it to its own.
MARKS = ("polled", "picked", "handed", "waiting", "durable", "posted", "taken", "sent")


class Timeline:
    """The server's marks by connection port: `marks[port][mark]` is a sorted list of ns."""

    def __init__(self) -> None:
        self.marks: dict[int, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list)
        )
        self.ports: dict[int, int] = {}  # file descriptor -> the client's port
        self.flushes: list[tuple[int, int, int]] = []  # (led, written, records)
        self.on = False
        # Requests the workers took up so far, and its value at each mark (as `marks`): how
        # many requests were answered between two marks, whatever the machine's speed.
        self.answered = 0
        self.counts: dict[int, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list)
        )

    def mark(self, fd: int, name: str, at: int) -> None:
        port = self.ports.get(fd)
        if port is not None and self.on:
            self.marks[port][name].append(at)
            self.counts[port][name].append(self.answered)


def instrument(server: PgServer, instance: Instance, timeline: Timeline) -> None:
    """Wraps the server's methods (on the objects: nothing of the product changes)."""
    last_poll: dict[int, int] = {}  # fd -> when the wait that returned it returned
    real_epoll = server._workers.epoll

    class Epoll:  # the workers' waits only: the server modifies the real set itself
        def __getattr__(self, name: str) -> Any:
            return getattr(real_epoll, name)

        def poll(self, timeout: float, most: int) -> list[tuple[int, int]]:
            events = real_epoll.poll(timeout, most)
            at = now()
            for fd, _ in events:
                last_poll[fd] = at
            return events

    server._workers.epoll = Epoll()  # type: ignore[assignment]
    event, answer = server._event, server._answer
    picked: dict[int, int] = {}

    def timed_event(fd: int, mask: int) -> None:
        picked[fd] = now()
        event(fd, mask)

    def timed_answer(client: Any) -> None:
        fd = client.sock.fileno()
        if fd not in timeline.ports:
            timeline.ports[fd] = client.sock.getpeername()[1]
        timeline.mark(fd, "polled", last_poll.get(fd, 0))
        timeline.mark(fd, "picked", picked.get(fd, 0))
        timeline.answered += 1
        answer(client)

    server._event = timed_event  # type: ignore[method-assign]
    server._answer = timed_answer  # type: ignore[method-assign]
    # `_workers` called the bound `_event` it was given: point it at the wrapper.
    server._workers._on_event = timed_event
    acknowledging = server._acknowledging
    hand_over = acknowledging.hand_over
    rounds_began = [0]  # when the acknowledging thread took its current round up

    def timed_hand_over(
        item: Any, wait_durable: Callable[[], None], is_durable: Callable[[], bool]
    ) -> None:
        fd = item[0].sock.fileno()
        timeline.mark(fd, "handed", now())

        def timed_wait() -> None:
            timeline.mark(fd, "waiting", rounds_began[0])
            try:
                wait_durable()
            finally:
                timeline.mark(fd, "durable", now())

        def timed_is_durable() -> bool:
            durable = is_durable()
            if durable:  # taken with the round before: waited with it
                at = now()
                timeline.mark(fd, "waiting", at)
                timeline.mark(fd, "durable", at)
            return durable

        hand_over(item, timed_wait, timed_is_durable)

    acknowledging.hand_over = timed_hand_over  # type: ignore[method-assign]
    rounds = acknowledging._rounds
    run_round = rounds._run_round

    def timed_run_round(round_: list[Any]) -> None:
        rounds_began[0] = now()
        run_round(round_)

    rounds._run_round = timed_run_round
    on_round = acknowledging._on_round

    def timed_round(answers: list[Any]) -> None:
        at = now()
        for (client, _), _ in answers:
            timeline.mark(client.sock.fileno(), "posted", at)
        on_round(answers)

    acknowledging._on_round = timed_round
    acknowledge = server._acknowledge

    def timed_acknowledge(handed: Any, error: Any) -> None:
        fd = handed[0].sock.fileno()
        timeline.mark(fd, "taken", now())
        acknowledge(handed, error)
        timeline.mark(fd, "sent", now())

    server._acknowledge = timed_acknowledge  # type: ignore[method-assign]
    log = instance.database("demo").log
    lead = log._lead

    def timed_lead(batch: Any, target: int) -> None:
        began = now()
        records = target - log.durable_lsn
        lead(batch, target)
        if timeline.on:
            timeline.flushes.append((began, now(), records))

    log._lead = timed_lead  # type: ignore[method-assign]


def report(timeline: Timeline, requests: list[tuple[int, int, int]], seconds: float) -> None:
    """Each client request matched to its server marks (the first of each in its span)."""
    stages: dict[str, list[int]] = collections.defaultdict(list)
    ahead: dict[str, list[int]] = collections.defaultdict(list)  # requests answered meanwhile
    matched = 0
    for port, began, done in requests:
        marks = timeline.marks.get(port)
        if marks is None:
            continue
        times, counts = [began], [0]
        for name in MARKS:
            row = marks[name]
            i = bisect.bisect_left(row, began)
            if i == len(row) or row[i] > done:
                break
            times.append(row[i])
            counts.append(timeline.counts[port][name][i])
        else:
            matched += 1
            times.append(done)
            names = ("client send",) + MARKS + ("client read",)
            for n in range(1, len(times)):
                stages[f"{names[n - 1]} -> {names[n]}"].append(times[n] - times[n - 1])
                if 1 < n < len(counts):
                    ahead[f"{names[n - 1]} -> {names[n]}"].append(counts[n] - counts[n - 1])
            stages["round trip"].append(done - began)
    print(
        f"{len(requests)} requests in {seconds:.1f} s ({len(requests) / seconds:.0f}/s),"
        f" {matched} matched to the server's marks"
    )
    print(f"  {'stage':<28} {'median us':>10} {'mean us':>9} {'requests taken up meanwhile':>28}")
    for stage, values in stages.items():
        taken = ahead.get(stage)
        print(
            f"  {stage:<28} {statistics.median(values) / 1e3:10.1f}"
            f" {statistics.fmean(values) / 1e3:9.1f}"
            + (f" {statistics.fmean(taken):28.2f}" if taken else "")
        )
    if timeline.flushes:
        writes = [b - a for a, b, _ in timeline.flushes]
        records = [r for _, _, r in timeline.flushes]
        gaps = [b[0] - a[1] for a, b in zip(timeline.flushes, timeline.flushes[1:], strict=False)]
        print(
            f"  flushes {len(writes)}: {statistics.fmean(records):.1f} commits each;"
            f" write+sync median {statistics.median(writes) / 1e3:.0f} us,"
            f" mean {statistics.fmean(writes) / 1e3:.0f};"
            f" from one's end to the next's lead median {statistics.median(gaps) / 1e3:.0f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--procs", type=int, default=4, help="client processes")
    parser.add_argument("--threads", type=int, default=16, help="server worker threads")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    timeline = Timeline()
    requests: list[tuple[int, int, int]] = []
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        server: PgServer | None = None
        try:
            pg_opcodes.make_tables(instance.session("demo", Principal("admin", is_admin=True)))
            server = PgServer(
                instance, PgOptions(port=0, threads=args.threads, link=LinkOptions(dev=True))
            )
            instrument(server, instance, timeline)
            server.start()
            each = [
                args.clients // args.procs + (p < args.clients % args.procs)
                for p in range(args.procs)
            ]
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        CLIENT,
                        str(server.address[1]),
                        str(sum(each[:p])),
                        str(n),
                        str(args.seconds),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for p, n in enumerate(each)
            ]
            for proc in procs:
                assert proc.stdout is not None
                if proc.stdout.readline().strip() != "ready":
                    raise SystemExit("the clients did not start")
            timeline.on = True
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            for proc in procs:
                out, _ = proc.communicate()
                requests += [tuple(map(int, line.split())) for line in out.split("\n") if line]  # type: ignore[misc]
            timeline.on = False
        finally:
            if server is not None:
                server.stop()
            instance.close()
    report(timeline, requests, args.seconds)


if __name__ == "__main__":
    main()
