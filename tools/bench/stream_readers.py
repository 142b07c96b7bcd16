"""The readers of tools/bench/stream.py: event streams (refimpl) and LISTEN connections
(PostgreSQL) held by forked processes of non-blocking sockets, what each notes of the events
it reads, the exactly-once check of the run's end, and where the readers run (CPU and
niceness) while the throughput is measured."""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import re
import selectors
import socket
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

PROCESSES = 8  # reader processes
QUIET_SECONDS = 5.0  # past the last phase, a reader that got no event for this long stops
WRITER_BLOCK = 1_000_000  # writer n of a throughput phase commits ids first + n * this + k
ROW = re.compile(rb'"row":\{"id":(\d+),"sent":([-0-9.e+]+)\}')


ROW_ID = re.compile(rb'"row":\{"id":(\d+)')


PAYLOAD_ID = re.compile(rb"^(\d+),", re.MULTILINE)  # NOTIFY payloads `id,sent`, one a line


EVENT_LSN = re.compile(rb"id: (\d+)\.\d+\nevent: change\n")


CHANGE = b"event: change\n"
KEEP = len(CHANGE) - 1  # of a read's last bytes: what may begin an event cut by its end
TAIL = 4096  # a stream's last bytes kept: its last event and what may follow it
EVENT_ID = re.compile(rb"id: ([0-9.]+)\nevent: change\n")  # a change event's id
# While throughput is measured the readers wake at most this often, each read taking all
# that came meanwhile: fewer, larger reads, as the figure's readers off the server's core
# are meant to cost the writers as little as they can.
UNTIMED_PASS_SECONDS = 0.05


class ReaderFlags:
    """What the main process tells its readers, shared with their processes."""

    def __init__(self, context: Any) -> None:
        self.ready = context.Value("i", 0)
        # Readers stop once this has passed and each of their streams has `expected` change
        # events, or they read nothing for QUIET_SECONDS: the main process sets both after
        # the last phase, when what was committed may still be coming (paced rounds).
        self.stop_at = context.Value("d", math.inf)
        self.expected = context.Value("q", 0)
        self.timed = context.RawValue("b", 1)  # parse each event for its latency


class Tally:
    """What a reader checks of one stream (listener): how many change events it got and
    the id of its last one (`last`, a pattern whose last match in the stream's last bytes
    is that id); the reference one also notes each row id and event LSN."""

    __slots__ = ("changes", "tail", "idents", "lsns", "_ident", "_last")

    def __init__(self, reference: bool, ident: re.Pattern[bytes], last: re.Pattern[bytes]) -> None:
        self.changes = 0
        # The stream's last TAIL bytes at least (its last id is in there), at most twice that.
        self.tail: bytes | bytearray = b""
        self.idents = array("q") if reference else None
        self.lsns = array("q") if reference else None
        self._ident = ident  # finds the row ids in what `add` is given
        self._last = last

    def add(self, events: bytes, changes: int) -> None:
        self.changes += changes
        self.tail = events if len(events) >= TAIL else self.tail[-TAIL:] + events
        if self.idents is not None:
            self.idents.extend(int(i) for i in self._ident.findall(events))
            self.lsns.extend(int(n) for n in EVENT_LSN.findall(events))

    def add_raw(self, buffer: bytearray, size: int) -> None:
        """The first `size` bytes of `buffer` as they came from a plain stream's socket,
        chunked: an event never straddles a chunk's framing (each chunk holds whole events),
        only the end of the socket's last read, which the tail's last bytes mend."""
        joint = self.tail[-KEEP:] + buffer[: min(size, KEEP)]
        self.changes += buffer.count(CHANGE, 0, size) + joint.count(CHANGE)
        self.tail = (
            buffer[size - TAIL : size] if size >= TAIL else self.tail[-TAIL:] + buffer[:size]
        )

    def result(self) -> tuple[int, bytes | None, bytes | None, bytes | None]:
        idents, lsns = self.idents, self.lsns
        found = self._last.findall(self.tail)
        return (
            self.changes,
            found[-1] if found else None,
            None if idents is None else idents.tobytes(),
            None if lsns is None else lsns.tobytes(),
        )


class Dechunked:
    """One stream's answer as it arrives: its head skipped, its chunks given whole (each a
    part of the stream), decompressed when the answer says `Content-Encoding: deflate`."""

    __slots__ = ("raw", "head_done", "ready", "inflate", "raw_reads")

    def __init__(self) -> None:
        self.raw = b""
        self.head_done = False
        self.ready = False  # its `ready` came
        self.inflate: Any = None  # a zlib decompressor, for a compressed answer
        self.raw_reads = False  # read raw from now on (`counted`)

    def counted(self, timed: bool, tally: Tally) -> bool:
        """Whether the stream is read raw now, its change events only counted
        (`Tally.add_raw`): a plain stream past its `ready`, other than the reference, while
        latencies are not measured. From then on it stays so; what was left of its last
        chunk is counted raw first."""
        if self.raw_reads:
            return True
        if timed or not self.ready or self.inflate is not None or tally.idents is not None:
            return False
        self.raw_reads = True
        left, self.raw = self.raw, b""
        tally.add_raw(bytearray(left), len(left))
        return True

    def chunks(self, data: bytes) -> Iterator[bytes]:
        raw = self.raw + data if self.raw else data
        if not self.head_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self.raw = raw
                return
            if re.search(rb"(?im)^content-encoding: *deflate\s*$", raw[:end]):
                self.inflate = zlib.decompressobj()
            raw, self.head_done = raw[end + 4 :], True
        at = 0
        while (line := raw.find(b"\r\n", at)) >= 0:
            size = int(raw[at:line], 16)
            if len(raw) < line + 4 + size:
                break
            if size:
                chunk = raw[line + 2 : line + 2 + size]
                yield chunk if self.inflate is None else self.inflate.decompress(chunk)
            at = line + 4 + size
        self.raw = raw[at:]


# --- refimpl streams (in forked processes) --------------------------------------------------


def _refimpl_streams(
    target: dict[str, Any], count: int, flags: ReaderFlags, reference: bool, results: Any
) -> None:
    host, port = target["url"].split("://", 1)[1].split(":")
    request = (
        f"GET /stream/changes?table=c HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {target['token']}\r\nAccept: text/event-stream\r\n"
        # What a browser's EventSource accepts includes it (a server that does not compress
        # ignores it); `--plain` leaves it out.
        + ("Accept-Encoding: deflate\r\n" if target.get("deflate", True) else "")
        + "\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    tallies = []
    pending = 0
    for n in range(count):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(request)
        sock.setblocking(False)
        tallies.append(Tally(reference and n == 0, ROW_ID, EVENT_ID))
        selector.register(sock, selectors.EVENT_READ, (Dechunked(), tallies[-1]))
        pending += 1
    idents, latencies = array("q"), array("f")
    buffer = bytearray(1 << 18)  # a plain stream's reads, once they are only counted
    heard = time.monotonic()
    while not _done(flags, tallies, heard):
        if not (ready := selector.select(timeout=0.5)):
            continue
        timed = flags.timed.value
        for key, _ in ready:
            stream, tally = key.data
            if stream.counted(timed, tally):
                # Read raw: one read into the same buffer, its change events counted in C.
                try:
                    size = key.fileobj.recv_into(buffer)
                except BlockingIOError:
                    continue
                if not size:
                    selector.unregister(key.fileobj)
                    continue
                before = tally.changes
                tally.add_raw(buffer, size)
                if tally.changes != before:
                    heard = time.monotonic()
                continue
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
                heard = now
                if timed:
                    for ident, sent in ROW.findall(events):
                        idents.append(int(ident))
                        latencies.append(now - float(sent))
        if not timed:
            time.sleep(UNTIMED_PASS_SECONDS)
    results.put((idents.tobytes(), latencies.tobytes(), [t.result() for t in tallies]))


# --- PostgreSQL listeners (in forked processes) ----------------------------------------------


def _pg_listeners(
    target: dict[str, Any], count: int, flags: ReaderFlags, reference: bool, results: Any
) -> None:
    import psycopg

    selector = selectors.DefaultSelector()
    connections = []
    tallies = []
    for n in range(count):
        connection = psycopg.connect(target["conninfo"], autocommit=True)
        connection.execute("LISTEN c")
        connections.append(connection)
        tallies.append(Tally(reference and n == 0, PAYLOAD_ID, PAYLOAD_ID))
        selector.register(
            connection.pgconn.socket, selectors.EVENT_READ, (connection.pgconn, tallies[-1])
        )
    with flags.ready.get_lock():
        flags.ready.value += count
    idents, latencies = array("q"), array("f")
    heard = time.monotonic()
    while not _done(flags, tallies, heard):
        if not (ready := selector.select(timeout=0.5)):
            continue
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
            heard = now
            if timed:
                for payload in payloads:
                    ident, sent = payload.split(b",")
                    idents.append(int(ident))
                    latencies.append(now - float(sent))
    for connection in connections:
        connection.close()
    results.put((idents.tobytes(), latencies.tobytes(), [t.result() for t in tallies]))


def _done(flags: ReaderFlags, tallies: list[Tally], heard: float) -> bool:
    """Past the last phase, every stream has every change committed, or no event came for
    QUIET_SECONDS (heartbeats do not count; the exactly-once check says what is missing)."""
    now = time.monotonic()
    if now < flags.stop_at.value:
        return False
    expected = flags.expected.value
    return now - heard > QUIET_SECONDS or all(t.changes >= expected for t in tallies)


def _threads(pids: Iterable[int]) -> Iterator[int]:
    """The thread ids of `pids` now (a process that ended has none)."""
    for pid in pids:
        try:
            yield from map(int, os.listdir(f"/proc/{pid}/task"))
        except FileNotFoundError:
            continue


def pin(pids: Iterable[int], cpus: set[int]) -> None:
    """Every thread of `pids` onto `cpus` (the threads and processes they start inherit it)."""
    for tid in _threads(pids):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass  # a thread that ended meanwhile


def renice(pids: Iterable[int], niceness: int) -> None:
    """Every thread of `pids` at `niceness` (back to 0 needs the right to raise priority:
    without it they stay as they are)."""
    for tid in _threads(pids):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)
        except OSError:
            pass


def schedule(pids: Iterable[int], policy: int) -> None:
    """Every thread of `pids` under the scheduling `policy` (back to `os.SCHED_OTHER` from
    `os.SCHED_IDLE` needs the right to raise priority: without it they stay as they are)."""
    for tid in _threads(pids):
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except OSError:
            pass


@contextmanager
def readers_off_server(server: list[int], readers: list[int]) -> Iterator[None]:
    """The server's processes on the first CPU alone, the clients' (this process, whose
    threads write, and the readers) on the others, the readers at niceness 19 and under
    SCHED_IDLE: they read with what the writers leave, as remote clients would not hold the
    writers up either. (At niceness 19 alone, a writer woken by its answer may wait for a
    running reader's slice to end: the kernel's scheduler, EEVDF, lets it run to parity;
    an idle-policy task gives way at once.) As before afterwards."""
    cpus = sorted(os.sched_getaffinity(0))
    # Back to where they were: a run under `nice` leaves its readers at its own niceness,
    # not above the server's.
    before = os.getpriority(os.PRIO_PROCESS, 0)
    pin(server, {cpus[0]})
    pin([os.getpid(), *readers], set(cpus[1:]))
    renice(readers, 19)
    schedule(readers, os.SCHED_IDLE)
    try:
        yield
    finally:
        pin([*server, os.getpid(), *readers], set(cpus))
        schedule(readers, os.SCHED_OTHER)
        renice(readers, before)


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
                raise RuntimeError(
                    f"only {self.flags.ready.value} of {self.count} readers are ready"
                )
            time.sleep(0.1)

    def timed(self, on: bool) -> None:
        """Whether readers parse each event for its latency (else they only count it)."""
        self.flags.timed.value = 1 if on else 0

    def results(
        self, expected: int
    ) -> tuple[dict[int, list[float]], list[tuple[int, Any, Any, Any]]]:
        """Once every reader read all that came (`expected` change events a stream, or
        nothing for QUIET_SECONDS): latencies (ms) by row id, over every stream; each
        stream's `Tally.result`."""
        self.flags.expected.value = expected
        self.flags.stop_at.value = time.monotonic()
        by_ident: dict[int, list[float]] = {}
        tallies: list[tuple[int, Any, Any, Any]] = []
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


def exactly_once(tallies: list[tuple[int, Any, Any, Any]], committed: list[range]) -> str:
    """'yes', or what went wrong: the reference stream holds every committed id once, each
    writer's in its order, its event LSNs rising; every stream has as many change events as
    it, the last of them with its last one's id."""
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
        return f"{others} streams differ from the reference (count or last event id)"
    return "yes"
