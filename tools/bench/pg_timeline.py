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
after the gathering sleep) and how long the write took. Each mark is noted on the server's
request it belongs to (the answer handed over carries it through the acknowledging thread
and the postbox), and each client request is matched to the first request its connection's
worker took up after the client began to send (by the connection's port): all its marks
are then one request's. A request whose marks are out of order is left out and counted, and
the script stops if a stage printed would end before it starts.

Printed: the median and mean of each stage (a stage's end minus its start; `sent` is apart,
as the send's own stage: the client may read the answer before the send returns), the round
trip as the client saw it, how many requests the workers took up during the stage (a
count, not a time: the same on a loaded machine), and the flushes (commits each, write
time, the time from one's end to the next's lead). Wrapping costs a few microseconds a
stage: compare stages with each other and two trees with each other (the script copied into
each tree's tools/bench and run from there, alternately), not with an unwrapped rate.

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

# A request's marks in order: each stage the time from the mark before it to its own.
# `sent` (its send returned) is apart: the client may read the answer before it returns.
MARKS = ("polled", "picked", "handed", "waiting", "durable", "posted", "taken")


class Timeline:
    """The server's requests by connection port: `requests[port]` lists each request the
    workers took up on it, in order, as its marks (name -> ns) and the count of requests
    taken up so far at each mark (name -> count)."""

    def __init__(self) -> None:
        self.requests: dict[int, list[tuple[dict[str, int], dict[str, int]]]] = (
            collections.defaultdict(list)
        )
        self.ports: dict[int, int] = {}  # file descriptor -> the client's port
        self.flushes: list[tuple[int, int, int]] = []  # (led, written, records)
        self.on = False
        # Requests the workers took up so far: how many were answered between two marks,
        # whatever the machine's speed.
        self.answered = 0

    def begin(self, fd: int) -> tuple[dict[str, int], dict[str, int]] | None:
        """A request taken up on `fd`: its marks from now on (None: not measured)."""
        port = self.ports.get(fd)
        if port is None or not self.on:
            return None
        request: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self.requests[port].append(request)
        return request

    def mark(
        self, request: tuple[dict[str, int], dict[str, int]] | None, name: str, at: int
    ) -> None:
        if request is not None:
            request[0][name] = at
            request[1][name] = self.answered


def instrument(server: PgServer, instance: Instance, timeline: Timeline) -> None:
    """Wraps the server's methods (on the objects: nothing of the product changes). Each
    mark goes to the request it belongs to: the one its worker took up (`_answer`), carried
    with its answer through the acknowledging thread and the postbox (by the handed item)."""
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
    current: dict[int, Any] = {}  # fd -> the request its worker answers now
    by_item: dict[int, Any] = {}  # id of a handed answer -> its request

    def timed_event(fd: int, mask: int) -> None:
        picked[fd] = now()
        event(fd, mask)

    def timed_answer(client: Any) -> None:
        fd = client.sock.fileno()
        if fd not in timeline.ports:
            timeline.ports[fd] = client.sock.getpeername()[1]
        request = current[fd] = timeline.begin(fd)
        # A poll older than the pick belongs to an earlier event: kept, the request's
        # check (`_ordered`) leaves it out rather than match it to another's marks.
        timeline.mark(request, "polled", last_poll.get(fd, 0))
        timeline.mark(request, "picked", picked.get(fd, 0))
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
        request = current.get(item[0].sock.fileno())
        by_item[id(item)] = request
        timeline.mark(request, "handed", now())

        def timed_wait() -> None:
            timeline.mark(request, "waiting", rounds_began[0])
            try:
                wait_durable()
            finally:
                timeline.mark(request, "durable", now())

        def timed_is_durable() -> bool:
            durable = is_durable()
            if durable:  # taken with the round before: waited with it
                at = now()
                timeline.mark(request, "waiting", at)
                timeline.mark(request, "durable", at)
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
        for item, _ in answers:
            timeline.mark(by_item.get(id(item)), "posted", at)
        on_round(answers)
        # What `more` took and found not durable yet is waited for next, in the same
        # `_run_round` call: its round begins now.
        rounds_began[0] = now()

    acknowledging._on_round = timed_round
    acknowledge = server._acknowledge

    def timed_acknowledge(handed: Any, error: Any) -> None:
        request = by_item.pop(id(handed), None)
        timeline.mark(request, "taken", now())
        acknowledge(handed, error)
        timeline.mark(request, "sent", now())

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


def _ordered(times: list[int]) -> int | None:
    """The first stage whose end is before its start (None: every stage >= 0)."""
    for n in range(1, len(times)):
        if times[n] < times[n - 1]:
            return n
    return None


def report(timeline: Timeline, requests: list[tuple[int, int, int]], seconds: float) -> None:
    """Each client request matched to the server's request on its connection that its
    worker took up first after the client began to send it (`picked`, before the client
    read the answer); every mark then is that request's own. A request whose marks are not
    in order is left out and counted by the stage that was not (a poll before the client
    sent: its worker answered it without a wait of its own)."""
    names = ("client send",) + MARKS + ("client read",)
    stages: dict[str, list[int]] = collections.defaultdict(list)
    ahead: dict[str, list[int]] = collections.defaultdict(list)  # requests answered meanwhile
    picks = {
        port: [marks.get("picked", 0) for marks, _ in served]
        for port, served in timeline.requests.items()
    }
    matched = 0
    unmatched = 0
    disordered: collections.Counter[str] = collections.Counter()
    for port, began, done in requests:
        served = timeline.requests.get(port)
        if served is None:
            continue
        i = bisect.bisect_left(picks[port], began)
        if i == len(served) or picks[port][i] > done:
            unmatched += 1
            continue
        marks, counts = served[i]
        if any(name not in marks for name in MARKS):
            unmatched += 1  # answered at once (no commit waited), or measured in part
            continue
        times = [began] + [marks[name] for name in MARKS] + [done]
        wrong = _ordered(times)
        if wrong is None and marks.get("sent", -1) < marks["taken"]:
            wrong = len(names)  # the send's own stage
        if wrong is not None:
            disordered[
                f"{names[wrong - 1]} -> {names[wrong]}" if wrong < len(names) else "taken -> sent"
            ] += 1
            continue
        matched += 1
        for n in range(1, len(times)):
            stage = f"{names[n - 1]} -> {names[n]}"
            stages[stage].append(times[n] - times[n - 1])
            if 1 < n < len(times) - 1:
                ahead[stage].append(counts[names[n]] - counts[names[n - 1]])
        stages["taken -> sent (the send)"].append(marks["sent"] - marks["taken"])
        stages["round trip"].append(done - began)
    print(
        f"{len(requests)} requests in {seconds:.1f} s ({len(requests) / seconds:.0f}/s),"
        f" {matched} matched to the server's marks; {unmatched} without all marks;"
        f" left out, marks out of order: {dict(disordered) or 'none'}"
    )
    # The check that the matching is sound: a stage that ends before it starts is a request
    # matched to another's marks.
    negative = [stage for stage, values in stages.items() if min(values) < 0]
    if negative:
        raise SystemExit(f"stages ending before they start: {negative}")
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
