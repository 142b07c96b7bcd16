"""1,000 open event streams (`GET /stream/changes`) against PostgreSQL LISTEN/NOTIFY, one run.

A writer commits single-row INSERTs into `c (id, sent)`, `sent` being its clock
(CLOCK_MONOTONIC, shared by all processes) just before the request; a stream's latency for
a commit is its clock when it has the event minus the row's `sent`.

- refimpl: `refimpl serve` (16 threads) with `stream_capacity`, `streams_per_token` and
  `streams_per_user` raised to 2,000. 1,000 streams of table `c`, held by 8 processes of
  non-blocking sockets (a selector each), 125 streams a process.
- PostgreSQL: an AFTER INSERT trigger calls pg_notify('c', id || ',' || sent); 1,000
  listeners (psycopg connections that ran LISTEN c) in 8 processes, read without blocking
  (a selector over the connections, `pgconn.consume_input` and `notifies`).

Figures, for both:
1. commit-to-event p50/p99 at 20 commits/s (target for refimpl: p99 under 50 ms);
2. the highest commit rate (of 20, 50, 100, 200, 400 a second, 5 s each) at which every
   stream (listener) gets every commit with p99 under 500 ms;
3. server memory per open stream (RSS with the streams open minus before, / 1,000; target
   under 50 KB); for PostgreSQL the listeners' backends' RSS / 1,000 (shared pages included);
4. server CPU while the streams are idle (heartbeats only) over 20 s, in % of a core
   (target under 2%);
5. single-row commit throughput (4 writers, 5 s) with the 1,000 streams open against none
   (target at least 0.8x), and the CPU the server and the readers took meanwhile (the
   readers share the machine's cores with the writers).

Beside them, at 20 commits/s: the server's CPU per commit and the readers' CPU per event
(they share the machine's cores). With `--server-timing` refimpl runs under a launcher that
notes each durable commit and each fan-out round (start, end, CPU time): the server's own
commit-to-socket time (the end of the round that carried a commit: its last stream's bytes
handed to the socket), without the readers' scheduling, and a round's CPU per stream.

    python tools/bench/stream.py                    # full, ~5 min
    python tools/bench/stream.py --quick            # 200 streams, shorter phases
    python tools/bench/stream.py --server-timing    # and the server's own figures
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import os
import re
import selectors
import socket
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any

import harness

PROCESSES = 8
# --server-timing: the server's durable commits and fan-out rounds, written as JSON to the
# launcher's first argument when it stops (CLOCK_MONOTONIC, as every process here reads it).
TIMING_LAUNCHER = """
import json, sys, time
from refimpl.engine import event_streams
from refimpl.waiting import room
out, commits, rounds = sys.argv[1], [], []
commit = event_streams.EventStreams._commit
def timed_commit(self, key, database):
    commits.append(time.monotonic())
    return commit(self, key, database)
event_streams.EventStreams._commit = timed_commit
fanout = room.WaitingRoom._fanout_round
def timed_round(self, requests, finished):
    started, cpu = time.monotonic(), time.thread_time()
    try:
        return fanout(self, requests, finished)
    finally:
        rounds.append((started, time.monotonic(), time.thread_time() - cpu, len(requests)))
room.WaitingRoom._fanout_round = timed_round
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    with open(out, "w") as file:
        json.dump({"commits": commits, "rounds": rounds}, file)
sys.exit(status)
"""
ROW = re.compile(rb'"row":\{"id":(\d+),"sent":([-0-9.e+]+)\}')
RATES = (20, 50, 100, 200, 400)
KEEP_UP_P99_MS = 500.0


# --- refimpl streams (in forked processes) --------------------------------------------------


def _refimpl_streams(target: dict[str, Any], count: int, ready: Any, stop_at: Any,
                     results: Any) -> None:  # fmt: skip
    host, port = target["url"].split("://", 1)[1].split(":")
    request = (
        f"GET /stream/changes?table=c HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {target['token']}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    pending = 0
    for _ in range(count):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(request)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, [b"", False])
        pending += 1
    idents, latencies = array("q"), array("f")
    while time.monotonic() < stop_at.value:
        for key, _ in selector.select(timeout=0.2):
            state = key.data
            try:
                data = key.fileobj.recv(262144)
            except BlockingIOError:
                continue
            now = time.monotonic()
            if not data:
                selector.unregister(key.fileobj)
                continue
            text = state[0] + data
            cut = text.rfind(b"\n\n")
            if cut < 0:
                state[0] = text
                continue
            whole, state[0] = text[:cut], text[cut + 2:]
            if not state[1] and b"event: ready" in whole:
                state[1] = True
                pending -= 1
                if pending == 0:
                    with ready.get_lock():
                        ready.value += count
            for ident, sent in ROW.findall(whole):
                idents.append(int(ident))
                latencies.append(now - float(sent))
    results.put((idents.tobytes(), latencies.tobytes()))


# --- PostgreSQL listeners (in forked processes) ----------------------------------------------


def _pg_listeners(target: dict[str, Any], count: int, ready: Any, stop_at: Any,
                  results: Any) -> None:  # fmt: skip
    import psycopg

    selector = selectors.DefaultSelector()
    connections = []
    for _ in range(count):
        connection = psycopg.connect(target["conninfo"], autocommit=True)
        connection.execute("LISTEN c")
        connections.append(connection)
        selector.register(connection.pgconn.socket, selectors.EVENT_READ, connection.pgconn)
    with ready.get_lock():
        ready.value += count
    idents, latencies = array("q"), array("f")
    while time.monotonic() < stop_at.value:
        for key, _ in selector.select(timeout=0.2):
            pgconn = key.data
            pgconn.consume_input()
            now = time.monotonic()
            while (notify := pgconn.notifies()) is not None:
                ident, sent = notify.extra.split(b",")
                idents.append(int(ident))
                latencies.append(now - float(sent))
    for connection in connections:
        connection.close()
    results.put((idents.tobytes(), latencies.tobytes()))


# --- writers --------------------------------------------------------------------------------


def _writer(target: dict[str, Any]) -> Any:
    if target["kind"] == "refimpl":
        client = harness.LeanHTTP(target["url"], {
            "Authorization": f"Bearer {target['token']}", "Content-Type": "text/plain"})

        def commit(ident: int) -> float:
            sent = time.monotonic()
            status, _, body = client.request(
                "POST", "/exec", f"INSERT INTO c VALUES ({ident}, {sent!r})".encode()
            )
            if status != 200:
                raise RuntimeError(f"the commit failed with {status}: {body[:200]!r}")
            return sent

        return commit
    import psycopg

    connection = psycopg.connect(target["conninfo"], autocommit=True)

    def commit_pg(ident: int) -> float:
        sent = time.monotonic()
        connection.execute("INSERT INTO c VALUES (%s, %s)", (ident, sent))
        return sent

    return commit_pg


def throughput(target: dict[str, Any], first_id: int, seconds: float, writers: int = 4) -> float:
    """Single-row commits a second of `writers` writers, each one at a time."""
    counts = [0] * writers
    stop = time.monotonic() + seconds

    def work(n: int) -> None:
        commit = _writer(target)
        ident = first_id + n * 1_000_000
        while time.monotonic() < stop:
            commit(ident)
            ident += 1
            counts[n] += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


class Readers:
    """`count` streams or listeners in up to PROCESSES processes, open `run_for` seconds
    from when all are ready (`wait_ready`): a thousand PostgreSQL connections take a while
    to open, and they must stay open through the last phase."""

    def __init__(self, target: dict[str, Any], count: int, run_for: float) -> None:
        context = multiprocessing.get_context("fork")
        self.ready = context.Value("i", 0)
        self.queue = context.Queue()
        self.count = count
        self.run_for = run_for
        self.stop_at = context.Value("d", time.monotonic() + run_for + 300.0)
        body = _refimpl_streams if target["kind"] == "refimpl" else _pg_listeners
        groups = [len(range(p, count, PROCESSES)) for p in range(min(PROCESSES, count))]
        self.processes = [
            context.Process(target=body, args=(target, n, self.ready, self.stop_at, self.queue))
            for n in groups
        ]
        for process in self.processes:
            process.start()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.ready.value < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.ready.value} of {self.count} readers are ready")
            time.sleep(0.1)
        self.stop_at.value = time.monotonic() + self.run_for

    def results(self) -> dict[int, list[float]]:
        """Latencies (ms) by row id, over every stream."""
        by_ident: dict[int, list[float]] = {}
        for _ in self.processes:
            raw_idents, raw_latencies = self.queue.get(timeout=max(60.0, self.stop_at.value
                                                                   - time.monotonic() + 60))
            idents, latencies = array("q"), array("f")
            idents.frombytes(raw_idents)
            latencies.frombytes(raw_latencies)
            for ident, latency in zip(idents, latencies, strict=True):
                by_ident.setdefault(ident, []).append(latency * 1000)
        for process in self.processes:
            process.join(30)
        return by_ident


def paced(target: dict[str, Any], rate: float, seconds: float, first_id: int) -> range:
    commit = _writer(target)
    total = int(rate * seconds)
    began = time.monotonic()
    for k in range(total):
        commit(first_id + k)
        time.sleep(max(0.0, began + (k + 1) / rate - time.monotonic()))
    return range(first_id, first_id + total)


def figures_of(by_ident: dict[int, list[float]], idents: range, streams: int) -> dict[str, float]:
    latencies = [lat for i in idents for lat in by_ident.get(i, [])]
    got = sum(min(len(by_ident.get(i, [])), streams) for i in idents)
    out = harness.summary(latencies) if latencies else {"p50": float("nan"), "p99": float("nan")}
    out["delivered"] = got / max(1, len(idents) * streams)
    return out


def process_rss_mb(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def processes_cpu(pids: list[int]) -> float:
    """CPU seconds of the processes still running (PostgreSQL's come and go)."""
    total = 0.0
    for pid in pids:
        try:
            total += harness.cpu_seconds(pid)
        except OSError:
            pass
    return total


def postgres_pids(pg: harness.Postgres) -> list[int]:
    main = int((pg.data / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
    return [main, *map(int, children)]


def run(target: dict[str, Any], pids: Any, streams: int, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    seconds = 3.0 if quick else 5.0
    out["throughput_none"] = throughput(target, 10_000_000, seconds)
    base_rss = process_rss_mb(pids())
    base_cpu = processes_cpu(pids())
    phases = 10.0 + 20.0 + len(RATES) * (seconds + 3.0) + seconds + 60.0
    readers = Readers(target, streams, phases)
    readers.wait_ready()
    opened_cpu = processes_cpu(pids())
    time.sleep(2.0)
    out["kb_per_stream"] = (process_rss_mb(pids()) - base_rss) * 1024 / streams
    idle_s = 10.0 if quick else 20.0
    started = processes_cpu(pids())
    time.sleep(idle_s)
    out["idle_cpu_pct"] = (processes_cpu(pids()) - started) / idle_s * 100
    out["open_cpu_s"] = opened_cpu - base_cpu
    next_id = 1
    readers_cpu = processes_cpu([p.pid for p in readers.processes])
    server_pids = pids()
    server_cpu = processes_cpu(server_pids)
    out["window_20"] = [time.monotonic()]
    latency_ids = paced(target, 20, 5.0 if quick else 10.0, next_id)
    out["window_20"].append(time.monotonic())
    out["server_ms_per_commit"] = (processes_cpu(server_pids) - server_cpu
                                   ) * 1000 / len(latency_ids)  # fmt: skip
    out["readers_us_per_event"] = (processes_cpu([p.pid for p in readers.processes])
                                   - readers_cpu) * 1e6 / (len(latency_ids) * streams)  # fmt: skip
    next_id = latency_ids.stop
    steps = []
    for rate in RATES:
        steps.append((rate, paced(target, rate, seconds, next_id)))
        next_id = steps[-1][1].stop
        time.sleep(1.0)
    readers_cpu = processes_cpu([p.pid for p in readers.processes])
    server_cpu = processes_cpu(server_pids)
    out["throughput_open"] = throughput(target, 50_000_000, seconds)
    # Where the cores went meanwhile: the readers' processes share them with the writers.
    out["open_readers_pct"] = (processes_cpu([p.pid for p in readers.processes])
                               - readers_cpu) / seconds * 100  # fmt: skip
    out["open_server_pct"] = (processes_cpu(server_pids) - server_cpu) / seconds * 100
    by_ident = readers.results()
    out["at_20"] = figures_of(by_ident, latency_ids, streams)
    out["steps"] = {rate: figures_of(by_ident, ids, streams) for rate, ids in steps}
    kept = [r for r, f in out["steps"].items()
            if f["delivered"] >= 0.999 and f["p99"] < KEEP_UP_P99_MS]  # fmt: skip
    out["max_rate"] = max(kept, default=0)
    return out


def server_timing(path: Path, window: list[float], streams: int) -> list[list[Any]]:
    """Rows of the server's own figures at 20 commits/s (see TIMING_LAUNCHER)."""
    noted = json.loads(path.read_text())
    rounds = sorted(noted["rounds"])
    starts = [r[0] for r in rounds]
    waits, outs = [], []
    for at in noted["commits"]:
        if window[0] <= at <= window[1]:
            found = bisect.bisect_left(starts, at)
            if found < len(rounds):
                waits.append((rounds[found][0] - at) * 1000)
                outs.append((rounds[found][1] - at) * 1000)
    big = [r for r in rounds if window[0] <= r[0] <= window[1] and r[3] >= streams // 2]
    cpu = harness.summary([r[2] * 1000 for r in big]) if big else {"p50": float("nan")}
    per_stream = harness.summary([r[2] / r[3] * 1e6 for r in big]) if big else cpu
    wall = harness.summary([(r[1] - r[0]) * 1000 for r in big]) if big else cpu
    a, b = harness.summary(waits), harness.summary(outs)
    return [
        ["commit to round start ms p50/p99", f"{a['p50']:.1f} / {a['p99']:.1f}"],
        ["commit to last send ms p50/p99", f"{b['p50']:.1f} / {b['p99']:.1f}"],
        [f"rounds of >= {streams // 2} streams", str(len(big))],
        ["round CPU ms p50 (wall ms p50)", f"{cpu['p50']:.1f} ({wall['p50']:.1f})"],
        ["round CPU us per stream p50", f"{per_stream['p50']:.1f}"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--streams", type=int, default=None)
    parser.add_argument("--server-timing", action="store_true",
                        help="note the server's commits and fan-out rounds (see TIMING_LAUNCHER)")
    options = parser.parse_args()
    streams = options.streams or (200 if options.quick else 1000)
    env = {"KDB_STREAM_CAPACITY": "2000", "KDB_STREAMS_PER_TOKEN": "2000",
           "KDB_STREAMS_PER_USER": "2000", "KDB_MAX_CONNECTIONS_PER_ADDRESS": "5000"}
    timing = None
    if options.server_timing:
        handle, name = tempfile.mkstemp(prefix="kdb-stream-timing-", suffix=".json")
        os.close(handle)
        timing = Path(name)
    load = os.getloadavg()
    with harness.RefimplServer(env=env, profile=timing, launcher=TIMING_LAUNCHER) as server:
        server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        target = {"kind": "refimpl", "url": server.url, "token": server.token}
        ours = run(target, lambda: [server.pid], streams, options.quick)
    with harness.Postgres({"max_connections": str(streams + 50)}) as pg:
        with pg.connect() as connection:
            connection.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE PRECISION)")
            connection.execute(
                "CREATE FUNCTION c_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " PERFORM pg_notify('c', NEW.id || ',' || NEW.sent); RETURN NEW; END $$"
            )
            connection.execute(
                "CREATE TRIGGER c_after AFTER INSERT ON c FOR EACH ROW EXECUTE FUNCTION"
                " c_notify()"
            )
        theirs = run({"kind": "pg", "conninfo": pg.conninfo}, lambda: postgres_pids(pg),
                     streams, options.quick)  # fmt: skip
    rows = []
    for label, key in [("p50 ms at 20 commits/s", "p50"), ("p99 ms at 20 commits/s", "p99")]:
        rows.append([label, f"{ours['at_20'][key]:.2f}", f"{theirs['at_20'][key]:.2f}"])
    rows.append(["delivered at 20/s", f"{ours['at_20']['delivered']:.4f}",
                 f"{theirs['at_20']['delivered']:.4f}"])  # fmt: skip
    for rate in RATES:
        a, b = ours["steps"][rate], theirs["steps"][rate]
        rows.append([f"{rate}/s: p99 ms, delivered", f"{a['p99']:.1f}, {a['delivered']:.4f}",
                     f"{b['p99']:.1f}, {b['delivered']:.4f}"])  # fmt: skip
    rows.append(["highest rate kept up (/s)", ours["max_rate"], theirs["max_rate"]])
    rows.append(["memory per stream KB", f"{ours['kb_per_stream']:.1f}",
                 f"{theirs['kb_per_stream']:.1f}"])  # fmt: skip
    rows.append(["idle CPU % of a core", f"{ours['idle_cpu_pct']:.2f}",
                 f"{theirs['idle_cpu_pct']:.2f}"])  # fmt: skip
    rows.append(["commits/s, none open", f"{ours['throughput_none']:.0f}",
                 f"{theirs['throughput_none']:.0f}"])  # fmt: skip
    rows.append(["commits/s, all open", f"{ours['throughput_open']:.0f}",
                 f"{theirs['throughput_open']:.0f}"])  # fmt: skip
    rows.append(["CPU % of a core, all open: server", f"{ours['open_server_pct']:.0f}",
                 f"{theirs['open_server_pct']:.0f}"])  # fmt: skip
    rows.append(["CPU % of a core, all open: readers", f"{ours['open_readers_pct']:.0f}",
                 f"{theirs['open_readers_pct']:.0f}"])  # fmt: skip
    rows.append(["server CPU ms per commit at 20/s", f"{ours['server_ms_per_commit']:.1f}",
                 f"{theirs['server_ms_per_commit']:.1f}"])  # fmt: skip
    rows.append(["readers' CPU us per event at 20/s", f"{ours['readers_us_per_event']:.1f}",
                 f"{theirs['readers_us_per_event']:.1f}"])  # fmt: skip
    ended = os.getloadavg()
    harness.print_table(["figure", "refimpl", "PostgreSQL"], rows,
                        f"{streams} streams / listeners; load average {load[0]:.1f} at the start,"
                        f" {ended[0]:.1f} at the end")  # fmt: skip
    if timing is not None:
        harness.print_table(["refimpl's own, at 20 commits/s", ""],
                            server_timing(timing, ours["window_20"], streams), "server timing")
        timing.unlink()
    ratio = ours["throughput_open"] / ours["throughput_none"]
    harness.print_checks([
        harness.Check("refimpl p99 commit-to-event at 20/s (ms)", ours["at_20"]["p99"],
                      "< 50", ours["at_20"]["p99"] < 50),
        harness.Check("refimpl memory per open stream (KB)", ours["kb_per_stream"], "< 50",
                      ours["kb_per_stream"] < 50),
        harness.Check("refimpl idle CPU, heartbeats only (% core)", ours["idle_cpu_pct"], "< 2",
                      ours["idle_cpu_pct"] < 2),
        harness.Check("refimpl commits/s with streams open / none", ratio, ">= 0.8",
                      ratio >= 0.8),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
