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

Every stream (listener) reads every event, the whole run. While latencies are measured a
reader parses each event; during the throughput phases it reads cheaply: the chunked coding
undone, events counted and summed into a CRC32 (in C, whatever their number). At the end one
reference stream, which also noted every row id and event id, must hold every committed row
exactly once, each writer's in its order, and every other stream the reference's count and
CRC32: every stream got every event exactly once, in order ("exactly once" below).

Figures, for both:
1. commit-to-event p50/p99 at 20 commits/s (target for refimpl: p99 under 50 ms);
2. the highest commit rate (of 20, 50, 100, 200, 400 a second, 5 s each) at which every
   stream (listener) gets every commit with p99 under 500 ms;
3. server memory per open stream (RSS with the streams open minus before, / 1,000; target
   under 50 KB); for PostgreSQL the listeners' backends' RSS / 1,000 (shared pages included);
4. server CPU while the streams are idle (heartbeats only) over 20 s, in % of a core
   (target under 2%);
5. single-row commit throughput (4 writers, 5 s) with the 1,000 streams open against none
   (target at least 0.8x), twice: as the machine schedules it, and with the readers off the
   server's core. On a 2-core machine the 8 reader processes and the writers compete with
   the server for its cores, which a deployment's remote clients would not: in the second
   figure the server (PostgreSQL: its postmaster and every backend) runs on the first CPU
   alone and the writers and readers on the others (`os.sched_setaffinity`), the readers at
   niceness 19 (they read with what the writers leave), in both phases and for both servers
   alike. The CPU the server and the readers took meanwhile is printed.

Beside them, at 20 commits/s: the server's CPU per commit and the readers' CPU per event
(they share the machine's cores). With `--server-timing` refimpl runs under a launcher that
notes each durable commit, each fan-out round (start, end, CPU time) and each write request
(its wall time in the worker, the CPU, run-queue and the rest of it, when it became durable
and when its answer went out): the server's own commit-to-socket time at 20 commits/s (the
end of the round that carried a commit: its last stream's bytes handed to the socket),
without the readers' scheduling, a round's CPU per stream; and, for the throughput phases
with the streams open, where a commit's time goes and where the server's threads spent it
(CPU, waiting for a core; the rest is waiting for the interpreter lock, a lock or I/O).

    python tools/bench/stream.py                    # full, ~6 min
    python tools/bench/stream.py --quick            # 200 streams, shorter phases
    python tools/bench/stream.py --quick --streams 1000 --server-timing
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import multiprocessing
import os
import re
import selectors
import socket
import tempfile
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import harness

PROCESSES = 8
# --server-timing: the server's durable commits, fan-out rounds, write requests and thread
# names, written as JSON to the launcher's first argument when it stops (CLOCK_MONOTONIC, as
# every process here reads it). A write request's split: its time in the worker (wall; CPU
# and run-queue wait from the thread's schedstat), and when its answer was handed over.
TIMING_LAUNCHER = """
import json, sys, threading, time
from refimpl.engine import event_streams
from refimpl.http.serving import connection, server
from refimpl.waiting import room
out, commits, durable, rounds, writes, names = sys.argv[1], [], [], [], [], {}
def named():
    names[threading.get_native_id()] = threading.current_thread().name
def schedstat():
    # The CPU time from the clock: schedstat's is brought up to date only at a switch.
    with open("/proc/thread-self/schedstat") as file:
        waited = file.read().split()[1]
    return time.thread_time(), int(waited) / 1e9
commit = event_streams.EventStreams._commit
def timed_commit(self, key, database):
    commits.append(time.monotonic())
    return commit(self, key, database)
event_streams.EventStreams._commit = timed_commit
on_commit = room.WaitingRoom._on_commit
def timed_on_commit(self):
    durable.append(time.monotonic())
    named()
    return on_commit(self)
room.WaitingRoom._on_commit = timed_on_commit
fanout = room.WaitingRoom._fanout_round
def timed_round(self, requests, finished):
    started, cpu = time.monotonic(), time.thread_time()
    named()
    try:
        return fanout(self, requests, finished)
    finally:
        rounds.append((started, time.monotonic(), time.thread_time() - cpu, len(requests)))
room.WaitingRoom._fanout_round = timed_round
serve_one = connection.Connection.serve_one
def timed_serve_one(self):
    began, (cpu, waited) = time.monotonic(), schedstat()
    named()
    try:
        return serve_one(self)
    finally:
        cpu_after, waited_after = schedstat()
        self.noted = (began, time.monotonic(), cpu_after - cpu, waited_after - waited)
connection.Connection.serve_one = timed_serve_one
deliver = server.PooledWSGIServer._deliver
def timed_deliver(self, handler, answer):
    noted = getattr(handler, "noted", None)
    if noted is not None:
        writes.append((*noted, time.monotonic()))
        handler.noted = None
    return deliver(self, handler, answer)
server.PooledWSGIServer._deliver = timed_deliver
from refimpl.http.endpoints import stream_route
backlogged, alone = [], []
on_backlog = stream_route._Sender.backlogged
def noted_backlog(self):
    backlogged.append(time.monotonic())
    return on_backlog(self)
stream_route._Sender.backlogged = noted_backlog
attempt = stream_route._Sender.attempt
def noted_attempt(self, lsn):
    alone.append(time.monotonic())
    return attempt(self, lsn)
stream_route._Sender.attempt = noted_attempt
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    names.update({t.native_id: t.name for t in threading.enumerate()})
    with open(out, "w") as file:
        json.dump({"commits": commits, "durable": durable, "rounds": rounds,
                   "writes": writes, "threads": names, "backlogged": backlogged,
                   "alone": alone}, file)
sys.exit(status)
"""
ROW = re.compile(rb'"row":\{"id":(\d+),"sent":([-0-9.e+]+)\}')
ROW_ID = re.compile(rb'"row":\{"id":(\d+)')
PAYLOAD_ID = re.compile(rb"^(\d+),", re.MULTILINE)  # NOTIFY payloads `id,sent`, one a line
EVENT_LSN = re.compile(rb"id: (\d+)\.\d+\nevent: change\n")
CHANGE = b"event: change\n"
RATES = (20, 50, 100, 200, 400)
KEEP_UP_P99_MS = 500.0
WRITER_BLOCK = 1_000_000  # writer n of a throughput phase commits ids first + n * this + k


class ReaderFlags:
    """What the main process tells its readers, shared with their processes."""

    def __init__(self, context: Any) -> None:
        self.ready = context.Value("i", 0)
        # Readers stop once this has passed and they read nothing for a while: the main
        # process sets it after the last phase, when what was committed may still be coming.
        self.stop_at = context.Value("d", math.inf)
        self.timed = context.RawValue("b", 1)  # parse each event for its latency


class Tally:
    """What a reader checks of one stream (listener): the change events it got, their CRC32
    in order; the reference one also notes each row id and event LSN."""

    __slots__ = ("changes", "crc", "idents", "lsns", "_ident")

    def __init__(self, reference: bool, ident: re.Pattern[bytes]) -> None:
        self.changes = 0
        self.crc = 0
        self.idents = array("q") if reference else None
        self.lsns = array("q") if reference else None
        self._ident = ident  # finds the row ids in what `add` is given

    def add(self, events: bytes, changes: int) -> None:
        self.changes += changes
        self.crc = zlib.crc32(events, self.crc)
        if self.idents is not None:
            self.idents.extend(int(i) for i in self._ident.findall(events))
            self.lsns.extend(int(n) for n in EVENT_LSN.findall(events))

    def result(self) -> tuple[int, int, bytes | None, bytes | None]:
        idents, lsns = self.idents, self.lsns
        return (self.changes, self.crc, None if idents is None else idents.tobytes(),
                None if lsns is None else lsns.tobytes())  # fmt: skip


class Dechunked:
    """One stream's answer as it arrives: its head skipped, its chunks given whole."""

    __slots__ = ("raw", "head_done", "ready")

    def __init__(self) -> None:
        self.raw = b""
        self.head_done = False
        self.ready = False  # its `ready` came

    def chunks(self, data: bytes) -> Iterator[bytes]:
        raw = self.raw + data if self.raw else data
        if not self.head_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self.raw = raw
                return
            raw, self.head_done = raw[end + 4:], True
        at = 0
        while (line := raw.find(b"\r\n", at)) >= 0:
            size = int(raw[at:line], 16)
            if len(raw) < line + 4 + size:
                break
            if size:
                yield raw[line + 2:line + 2 + size]
            at = line + 4 + size
        self.raw = raw[at:]


# --- refimpl streams (in forked processes) --------------------------------------------------


def _refimpl_streams(target: dict[str, Any], count: int, flags: ReaderFlags, reference: bool,
                     results: Any) -> None:  # fmt: skip
    host, port = target["url"].split("://", 1)[1].split(":")
    request = (
        f"GET /stream/changes?table=c HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {target['token']}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    tallies = []
    pending = 0
    for n in range(count):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(request)
        sock.setblocking(False)
        tallies.append(Tally(reference and n == 0, ROW_ID))
        selector.register(sock, selectors.EVENT_READ, (Dechunked(), tallies[-1]))
        pending += 1
    idents, latencies = array("q"), array("f")
    while (ready := selector.select(timeout=0.5)) or time.monotonic() < flags.stop_at.value:
        timed = flags.timed.value
        for key, _ in ready:
            stream, tally = key.data
            try:
                data = key.fileobj.recv(262144)
            except BlockingIOError:
                continue
            now = time.monotonic()
            if not data:
                selector.unregister(key.fileobj)
                continue
            for events in stream.chunks(data):
                if events[:1] == b":":
                    continue  # a heartbeat, or the stream's end: a comment
                if not stream.ready:
                    stream.ready = True
                    pending -= 1
                    if pending == 0:
                        with flags.ready.get_lock():
                            flags.ready.value += count
                tally.add(events, events.count(CHANGE))
                if timed:
                    for ident, sent in ROW.findall(events):
                        idents.append(int(ident))
                        latencies.append(now - float(sent))
    results.put((idents.tobytes(), latencies.tobytes(), [t.result() for t in tallies]))


# --- PostgreSQL listeners (in forked processes) ----------------------------------------------


def _pg_listeners(target: dict[str, Any], count: int, flags: ReaderFlags, reference: bool,
                  results: Any) -> None:  # fmt: skip
    import psycopg

    selector = selectors.DefaultSelector()
    connections = []
    tallies = []
    for n in range(count):
        connection = psycopg.connect(target["conninfo"], autocommit=True)
        connection.execute("LISTEN c")
        connections.append(connection)
        tallies.append(Tally(reference and n == 0, PAYLOAD_ID))
        selector.register(connection.pgconn.socket, selectors.EVENT_READ,
                          (connection.pgconn, tallies[-1]))  # fmt: skip
    with flags.ready.get_lock():
        flags.ready.value += count
    idents, latencies = array("q"), array("f")
    while (ready := selector.select(timeout=0.5)) or time.monotonic() < flags.stop_at.value:
        timed = flags.timed.value
        for key, _ in ready:
            pgconn, tally = key.data
            pgconn.consume_input()
            now = time.monotonic()
            payloads = []
            while (notify := pgconn.notifies()) is not None:
                payloads.append(notify.extra)
            if not payloads:
                continue
            tally.add(b"\n".join(payloads) + b"\n", len(payloads))  # however they batch
            if timed:
                for payload in payloads:
                    ident, sent = payload.split(b",")
                    idents.append(int(ident))
                    latencies.append(now - float(sent))
    for connection in connections:
        connection.close()
    results.put((idents.tobytes(), latencies.tobytes(), [t.result() for t in tallies]))


# --- writers --------------------------------------------------------------------------------


def _writer(target: dict[str, Any]) -> Callable[[int], float]:
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


class Throughput:
    """Single-row commits a second of `writers` writers, each one at a time; the ids they
    committed (writer n: `first_id + n * WRITER_BLOCK` on), the window and their latencies."""

    def __init__(self, target: dict[str, Any], first_id: int, seconds: float,
                 writers: int = 4) -> None:  # fmt: skip
        counts = [0] * writers
        latencies: list[list[float]] = [[] for _ in range(writers)]
        self.began = time.monotonic()
        stop = self.began + seconds

        def work(n: int) -> None:
            commit = _writer(target)
            ident = first_id + n * WRITER_BLOCK
            while time.monotonic() < stop:
                sent = commit(ident)
                latencies[n].append((time.monotonic() - sent) * 1000)
                ident += 1
                counts[n] += 1

        threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.ended = time.monotonic()
        self.rate = sum(counts) / seconds
        self.committed = [range(first_id + n * WRITER_BLOCK, first_id + n * WRITER_BLOCK + c)
                          for n, c in enumerate(counts)]  # fmt: skip
        self.latency = harness.summary([lat for one in latencies for lat in one])


def pin(pids: Iterable[int], cpus: set[int]) -> None:
    """Every thread of `pids` onto `cpus` (the threads and processes they start inherit it)."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass  # a thread that ended meanwhile


def renice(pids: Iterable[int], niceness: int) -> None:
    """Every thread of `pids` at `niceness` (back to 0 needs the right to raise priority:
    without it they stay as they are)."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), niceness)
            except OSError:
                pass


@contextmanager
def readers_off_server(server: list[int], readers: list[int]) -> Iterator[None]:
    """The server's processes on the first CPU alone, the clients' (this process, whose
    threads write, and the readers) on the others, the readers at niceness 19: they read
    with what the writers leave, as remote clients would not hold the writers up either.
    As before afterwards."""
    cpus = sorted(os.sched_getaffinity(0))
    pin(server, {cpus[0]})
    pin([os.getpid(), *readers], set(cpus[1:]))
    renice(readers, 19)
    try:
        yield
    finally:
        pin([*server, os.getpid(), *readers], set(cpus))
        renice(readers, 0)


class Readers:
    """`count` streams or listeners in up to PROCESSES processes, open until `results`:
    a thousand PostgreSQL connections take a while to open (`wait_ready`), and they must
    stay open through the last phase."""

    def __init__(self, target: dict[str, Any], count: int) -> None:
        context = multiprocessing.get_context("fork")
        self.flags = ReaderFlags(context)
        self.queue = context.Queue()
        self.count = count
        body = _refimpl_streams if target["kind"] == "refimpl" else _pg_listeners
        groups = [len(range(p, count, PROCESSES)) for p in range(min(PROCESSES, count))]
        self.processes = [
            context.Process(target=body, args=(target, n, self.flags, p == 0, self.queue))
            for p, n in enumerate(groups)
        ]
        for process in self.processes:
            process.start()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.flags.ready.value < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.flags.ready.value} of {self.count} readers"
                                   " are ready")  # fmt: skip
            time.sleep(0.1)

    def timed(self, on: bool) -> None:
        """Whether readers parse each event for its latency (else they only count it)."""
        self.flags.timed.value = 1 if on else 0

    def results(self) -> tuple[dict[int, list[float]], list[tuple[int, int, Any, Any]]]:
        """Once every reader read all that came: latencies (ms) by row id, over every
        stream; each stream's `Tally.result`."""
        self.flags.stop_at.value = time.monotonic()
        by_ident: dict[int, list[float]] = {}
        tallies: list[tuple[int, int, Any, Any]] = []
        for _ in self.processes:
            raw_idents, raw_latencies, tallied = self.queue.get(timeout=600)
            idents, latencies = array("q"), array("f")
            idents.frombytes(raw_idents)
            latencies.frombytes(raw_latencies)
            for ident, latency in zip(idents, latencies, strict=True):
                by_ident.setdefault(ident, []).append(latency * 1000)
            tallies.extend(tallied)
        for process in self.processes:
            process.join(30)
        return by_ident, tallies


def exactly_once(tallies: list[tuple[int, int, Any, Any]], committed: list[range]) -> str:
    """'yes', or what went wrong: the reference stream holds every committed id once, each
    writer's in its order, its event LSNs rising; every stream equals it (count, CRC32)."""
    reference = next(t for t in tallies if t[2] is not None)
    idents, lsns = array("q"), array("q")
    idents.frombytes(reference[2])
    lsns.frombytes(reference[3])
    expected = sorted(i for ids in committed for i in ids)
    if sorted(idents) != expected:
        return f"the reference stream got {len(idents)} rows of {len(expected)} committed"
    last: dict[int, int] = {}
    for ident in idents:
        if last.get(ident // WRITER_BLOCK, -1) >= ident:
            return f"row {ident} came out of its writer's order"
        last[ident // WRITER_BLOCK] = ident
    if any(a >= b for a, b in itertools.pairwise(lsns)):
        return "the reference stream's event ids do not rise"
    others = sum(1 for t in tallies if t[:2] != reference[:2])
    if others:
        return f"{others} streams differ from the reference (count or CRC32)"
    return "yes"


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


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its children, the ended ones included (PostgreSQL's
    backends come and go; a parent that waited for a child holds its time)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    # utime, stime, cutime, cstime: fields 14 to 17 (fields[0] is field 3).
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return total + processes_cpu([int(c) for c in children])


def threads_schedstat(pid: int) -> dict[int, tuple[float, float]]:
    """By thread id: its CPU seconds and seconds spent runnable waiting for a core."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu, waited, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(cpu) / 1e9, int(waited) / 1e9)
    return out


def postgres_pids(pg: harness.Postgres) -> list[int]:
    main = int((pg.data / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
    return [main, *map(int, children)]


def throughput_phase(target: dict[str, Any], pids: Callable[[], list[int]],
                     readers: Readers | None, first_id: int, seconds: float, pinned: bool
                     ) -> dict[str, Any]:  # fmt: skip
    """Throughput with the streams open (`readers`) or none; the CPU the server and the
    readers took meanwhile (the readers share the machine's cores with the writers unless
    `pinned`) and the server's threads' schedstat before and after."""
    server_pids = pids()
    reader_pids = [] if readers is None else readers.pids
    readers_cpu, server_cpu = processes_cpu(reader_pids), tree_cpu(server_pids[0])
    threads = threads_schedstat(server_pids[0])
    if pinned:
        with readers_off_server(server_pids, reader_pids):
            done = Throughput(target, first_id, seconds)
    else:
        done = Throughput(target, first_id, seconds)
    elapsed = done.ended - done.began
    return {
        "run": done,
        "readers_pct": (processes_cpu(reader_pids) - readers_cpu) / elapsed * 100,
        "server_pct": (tree_cpu(server_pids[0]) - server_cpu) / elapsed * 100,
        "threads": (threads, threads_schedstat(server_pids[0])),
    }


def run(target: dict[str, Any], pids: Callable[[], list[int]], streams: int,
        quick: bool) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {}
    seconds = 3.0 if quick else 5.0
    out["none"] = throughput_phase(target, pids, None, 10_000_000, seconds, pinned=False)
    out["pinned_none"] = throughput_phase(target, pids, None, 20_000_000, seconds, pinned=True)
    base_rss = process_rss_mb(pids())
    base_cpu = processes_cpu(pids())
    readers = Readers(target, streams)
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
    readers_cpu = processes_cpu(readers.pids)
    server_pids = pids()
    server_cpu = processes_cpu(server_pids)
    out["window_20"] = [time.monotonic()]
    latency_ids = paced(target, 20, 5.0 if quick else 10.0, next_id)
    out["window_20"].append(time.monotonic())
    out["server_ms_per_commit"] = (processes_cpu(server_pids) - server_cpu
                                   ) * 1000 / len(latency_ids)  # fmt: skip
    out["readers_us_per_event"] = (processes_cpu(readers.pids)
                                   - readers_cpu) * 1e6 / (len(latency_ids) * streams)  # fmt: skip
    next_id = latency_ids.stop
    steps = []
    for rate in RATES:
        steps.append((rate, paced(target, rate, seconds, next_id)))
        next_id = steps[-1][1].stop
        time.sleep(1.0)
    time.sleep(1.0)  # late events of the last step still get their latency
    readers.timed(False)
    out["open"] = throughput_phase(target, pids, readers, 50_000_000, seconds, pinned=False)
    out["pinned_open"] = throughput_phase(target, pids, readers, 60_000_000, seconds,
                                          pinned=True)  # fmt: skip
    by_ident, tallies = readers.results()
    committed = [latency_ids, *(ids for _, ids in steps), *out["open"]["run"].committed,
                 *out["pinned_open"]["run"].committed]  # fmt: skip
    out["exactly_once"] = exactly_once(tallies, committed)
    out["at_20"] = figures_of(by_ident, latency_ids, streams)
    out["steps"] = {rate: figures_of(by_ident, ids, streams) for rate, ids in steps}
    kept = [r for r, f in out["steps"].items()
            if f["delivered"] >= 0.999 and f["p99"] < KEEP_UP_P99_MS]  # fmt: skip
    out["max_rate"] = max(kept, default=0)
    return out


def server_timing(noted: dict[str, Any], window: list[float], streams: int) -> list[list[Any]]:
    """Rows of the server's own figures at 20 commits/s (see TIMING_LAUNCHER)."""
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


def _thread_kind(name: str) -> str:
    return "workers" if name.startswith("kdb-http-") else name.removeprefix("kdb-")


def throughput_timing(noted: dict[str, Any], phase: dict[str, Any], streams: int
                      ) -> dict[str, str]:  # fmt: skip
    """Where a commit's time and the server's threads' went in a throughput phase, by row
    label (see TIMING_LAUNCHER)."""
    done = phase["run"]
    began, ended = done.began, done.ended
    span = ended - began
    durable = sorted(noted["durable"])
    writes = [w for w in noted["writes"] if began <= w[0] <= ended]
    parts: dict[str, list[float]] = {"worker": [], "cpu": [], "run queue": [], "rest": [],
                                     "durable": [], "answer": []}  # fmt: skip
    for start, end, cpu, queued, answered in writes:
        parts["worker"].append((end - start) * 1000)
        parts["cpu"].append(cpu * 1000)
        parts["run queue"].append(queued * 1000)
        parts["rest"].append((end - start - cpu - queued) * 1000)
        found = bisect.bisect_left(durable, end)
        at = durable[found] if found < len(durable) and durable[found] <= answered else answered
        parts["durable"].append((at - end) * 1000)
        parts["answer"].append((answered - at) * 1000)
    p50 = {k: harness.summary(v)["p50"] for k, v in parts.items()}
    rounds = [r for r in noted["rounds"] if began <= r[0] <= ended]
    big = [r for r in rounds if r[3] >= streams // 2]
    per_stream = harness.summary([r[2] / r[3] * 1e6 for r in big])["p50"]
    before, after = phase["threads"]
    names = {int(k): v for k, v in noted["threads"].items()}
    kinds: dict[str, list[float]] = {}
    for tid, (cpu, queued) in after.items():
        cpu0, queued0 = before.get(tid, (0.0, 0.0))
        kind = kinds.setdefault(_thread_kind(names.get(tid, "other")), [0.0, 0.0])
        kind[0] += (cpu - cpu0) / span * 100
        kind[1] += (queued - queued0) / span * 100
    walls = harness.summary([(r[1] - r[0]) * 1000 for r in big])["p50"]
    rows = {
        "client's commit latency ms p50, p99":
            f"{done.latency['p50']:.2f}, {done.latency['p99']:.2f}",
        "in the worker ms p50: wall": f"{p50['worker']:.2f}",
        "  of it CPU / waiting for a core / rest":
            f"{p50['cpu']:.2f} / {p50['run queue']:.2f} / {p50['rest']:.2f}",
        "parked to durable ms p50 (flush)": f"{p50['durable']:.2f}",
        "durable to answer handed over ms p50": f"{p50['answer']:.2f}",
        "fan-out rounds; their CPU, % of the phase":
            f"{len(rounds)}; {sum(r[2] for r in rounds) / span * 100:.1f}",
        "round of all: CPU us per stream, wall ms p50": f"{per_stream:.1f}, {walls:.1f}",
        "streams backlogged; takes alone":
            f"{sum(began <= t <= ended for t in noted['backlogged'])};"
            f" {sum(began <= t <= ended for t in noted['alone'])}",
        "server CPU ms per commit": f"{phase['server_pct'] * 10 / done.rate:.2f}",
    }  # fmt: skip
    for kind, (cpu, queued) in sorted(kinds.items()):
        rows[f"thread {kind}: CPU % / waiting for a core %"] = f"{cpu:.0f} / {queued:.0f}"
    return rows


def figure_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """The figures' table: a row a figure, a column a server."""

    def row(label: str, figure: Callable[[dict[str, Any]], Any]) -> list[Any]:
        return [label, *(figure(result) for result in results)]

    rows = [
        row("p50 ms at 20 commits/s", lambda r: f"{r['at_20']['p50']:.2f}"),
        row("p99 ms at 20 commits/s", lambda r: f"{r['at_20']['p99']:.2f}"),
        row("delivered at 20/s", lambda r: f"{r['at_20']['delivered']:.4f}"),
    ]
    for rate in RATES:
        rows.append(row(f"{rate}/s: p99 ms, delivered", lambda r, rate=rate:
                        f"{r['steps'][rate]['p99']:.1f}, {r['steps'][rate]['delivered']:.4f}"))
    rows += [
        row("highest rate kept up (/s)", lambda r: r["max_rate"]),
        row("memory per stream KB", lambda r: f"{r['kb_per_stream']:.1f}"),
        row("idle CPU % of a core", lambda r: f"{r['idle_cpu_pct']:.2f}"),
    ]
    for label, none, opened in [("", "none", "open"),
                                ("readers off the server's core: ", "pinned_none", "pinned_open")]:
        for phase, title in [(none, "none open"), (opened, "all open")]:
            rows.append(row(f"{label}commits/s, {title}", lambda r, phase=phase:
                            f"{r[phase]['run'].rate:.0f}"))
        for who in ("server", "readers"):
            rows.append(row(f"{label}CPU % of a core, all open: {who}",
                            lambda r, opened=opened, who=who: f"{r[opened][who + '_pct']:.0f}"))
    rows += [
        row("every stream got every event once, in order", lambda r: r["exactly_once"]),
        row("server CPU ms per commit at 20/s", lambda r: f"{r['server_ms_per_commit']:.1f}"),
        row("readers' CPU us per event at 20/s", lambda r: f"{r['readers_us_per_event']:.1f}"),
    ]
    return rows  # fmt: skip


def postgres_run(streams: int, quick: bool) -> dict[str, Any]:
    """The same run against a throwaway PostgreSQL cluster, its trigger notifying."""
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
        return run({"kind": "pg", "conninfo": pg.conninfo}, lambda: postgres_pids(pg),
                   streams, quick)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--streams", type=int, default=None)
    parser.add_argument("--server-timing", action="store_true",
                        help="note the server's commits and fan-out rounds (see TIMING_LAUNCHER)")
    parser.add_argument("--no-postgres", action="store_true",
                        help="refimpl alone (to study it; its figures have no PostgreSQL beside)")
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
    theirs = None if options.no_postgres else postgres_run(streams, options.quick)
    ended = os.getloadavg()
    results = [ours] if theirs is None else [ours, theirs]
    harness.print_table(["figure", "refimpl", "PostgreSQL"][:len(results) + 1],
                        figure_rows(results),
                        f"{streams} streams / listeners; load average {load[0]:.1f} at the start,"
                        f" {ended[0]:.1f} at the end")  # fmt: skip
    if timing is not None:
        noted = json.loads(timing.read_text())
        timing.unlink()
        harness.print_table(["refimpl's own, at 20 commits/s", ""],
                            server_timing(noted, ours["window_20"], streams), "server timing")
        phases = ["none", "open", "pinned_none", "pinned_open"]
        columns = [throughput_timing(noted, ours[phase], streams) for phase in phases]
        labels = sorted({label for column in columns for label in column},
                        key=lambda label: (label.startswith("thread"), label))  # fmt: skip
        harness.print_table(
            ["refimpl's commits, streams open:", "none", "all", "none, pinned", "all, pinned"],
            [[label, *(column.get(label, "") for column in columns)] for label in labels],
            "server timing (pinned: the readers off the server's core)")
    ratio = ours["open"]["run"].rate / ours["none"]["run"].rate
    pinned_ratio = ours["pinned_open"]["run"].rate / ours["pinned_none"]["run"].rate
    checks = [
        harness.Check("refimpl p99 commit-to-event at 20/s (ms)", ours["at_20"]["p99"],
                      "< 50", ours["at_20"]["p99"] < 50),
        harness.Check("refimpl memory per open stream (KB)", ours["kb_per_stream"], "< 50",
                      ours["kb_per_stream"] < 50),
        harness.Check("refimpl idle CPU, heartbeats only (% core)", ours["idle_cpu_pct"], "< 2",
                      ours["idle_cpu_pct"] < 2),
        harness.Check("refimpl commits/s with streams open / none", ratio, ">= 0.8",
                      ratio >= 0.8),
        harness.Check("  the same, readers off the server's core", pinned_ratio, ">= 0.8",
                      pinned_ratio >= 0.8),
    ]  # fmt: skip
    if theirs is not None:
        checks += [
            harness.Check("PostgreSQL commits/s with listeners / none",
                          theirs["open"]["run"].rate / theirs["none"]["run"].rate),
            harness.Check("  the same, readers off the server's core",
                          theirs["pinned_open"]["run"].rate / theirs["pinned_none"]["run"].rate),
        ]  # fmt: skip
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
