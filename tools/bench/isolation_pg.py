"""The PostgreSQL-protocol side of `isolation.py`: the victim's point SELECTs and the hostile
protocol clients (pipelining, COPY FROM STDIN, connections that never log in).

The messages are written on raw sockets here rather than through a driver, so that a client
can do what a driver would not: send hundreds of queries without reading an answer, stream
COPY data without waiting for anything, or dribble a startup packet a byte a second.

Every function that runs a client takes the moment it stops (`until`, `time.monotonic()`),
puts one tagged tuple on its queue at the end and closes every socket it opened.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections import Counter
from typing import Any

PROTOCOL_3 = 196608
Address = tuple[str, int]

VICTIM_EVERY = 0.100
# A pipelined query: 14 KB of text (the size of the issue's) whose answer is 10 rows that
# carry it back, 140 KB: few messages for the client to read, many bytes for the server.
PIPELINE_SQL = "SELECT id, '" + "x" * 14_000 + "' AS pad FROM big WHERE id < 10"
PIPELINE_CONNECTIONS = 2
# Queries sent, half simple and half extended, before any answer is read: 14 MB, more than
# the sockets' buffers hold, so the sends stall once the server stops reading.
PIPELINE_BATCH = 1000
# How long a pipelining client reads nothing once the server stops taking its queries: well
# within the 60 s the server gives a client that takes no answer.
PIPELINE_HOLD = 5.0
STALLED_AFTER = 1.0  # a send that makes no progress this long: the server stopped reading
COPY_LINE_BODY = "c" * 1000
COPY_LINES_PER_MESSAGE = 256  # about 256 KB of CopyData a message
# The prelogin sockets leave from another loopback address than the victim's, so that they
# fill their own address's places for connections not logged in, as clients elsewhere would.
PRELOGIN_SOURCE = "127.0.0.2"
PRELOGIN_SOCKETS = 16  # pg_max_unauthenticated_per_address's default: the most one address has
PRELOGIN_BYTE_EVERY = 1.0  # a slow client's startup packet, a byte a second


class LoginRefused(Exception):
    """The server refused the login; the SQLSTATE is the message."""


def message(kind: bytes, body: bytes) -> bytes:
    """One protocol message: its type byte, its length, its body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def query(sql: str) -> bytes:
    """A simple-protocol Query."""
    return message(b"Q", sql.encode() + b"\0")


def extended(sql: str) -> bytes:
    """The extended protocol's Parse, Bind, Execute and Sync of `sql` (no parameters)."""
    return (
        message(b"P", b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))
        + message(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
        + message(b"E", b"\0" + struct.pack("!i", 0))
        + message(b"S", b"")
    )


def startup(user: str, database: str) -> bytes:
    """A StartupMessage of protocol 3.0 for `user` and `database`."""
    pairs = b"".join(f"{k}\0{v}\0".encode() for k, v in (("user", user), ("database", database)))
    body = struct.pack("!i", PROTOCOL_3) + pairs + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def sqlstate(body: bytes) -> str:
    """The SQLSTATE of an ErrorResponse's body."""
    for field in body.split(b"\0"):
        if field[:1] == b"C":
            return field[1:].decode()
    return "?????"


class Connection:
    """One logged-in connection of the protocol: raw bytes out, whole messages in."""

    def __init__(
        self, address: Address, user: str, password: str, database: str, timeout: float = 30.0
    ) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.at = 0  # where the next message starts in `buffer`
        try:
            self.sock.sendall(startup(user, database))
            while True:
                kind, body = self.read()
                if kind == b"R" and struct.unpack("!i", body[:4])[0] == 3:
                    self.sock.sendall(message(b"p", password.encode() + b"\0"))
                elif kind == b"E":
                    raise LoginRefused(sqlstate(body))
                elif kind == b"Z":
                    return
        except BaseException:
            self.sock.close()
            raise

    def take(self) -> tuple[bytes, bytes] | None:
        """The next whole message already received, or None."""
        if len(self.buffer) - self.at < 5:
            return None
        (length,) = struct.unpack_from("!i", self.buffer, self.at + 1)
        end = self.at + 1 + length
        if len(self.buffer) < end:
            return None
        kind, body = self.buffer[self.at : self.at + 1], self.buffer[self.at + 5 : end]
        self.at = end
        return kind, body

    def receive(self) -> None:
        """Read what the socket has (waiting for some); EOFError when the server closed."""
        chunk = self.sock.recv(262144)
        if not chunk:
            raise EOFError("the server closed the connection")
        # Messages are taken by position: dropping the consumed part once per read keeps a
        # long answer of small rows linear.
        self.buffer = self.buffer[self.at :] + chunk
        self.at = 0

    def read(self) -> tuple[bytes, bytes]:
        """The next message, waiting for it."""
        while True:
            taken = self.take()
            if taken is not None:
                return taken
            self.receive()

    def run(self, sql: str) -> str:
        """Run one simple Query to its ReadyForQuery: "" or the first error's SQLSTATE."""
        self.sock.sendall(query(sql))
        error = ""
        while True:
            kind, body = self.read()
            if kind == b"E" and not error:
                error = sqlstate(body)
            elif kind == b"Z":
                return error

    def close(self) -> None:
        try:
            self.sock.sendall(message(b"X", b""))
        except OSError:
            pass
        self.sock.close()


def pg_address(output: list[str]) -> Address:
    """The protocol port's address, from the server's `postgres on host:port` line."""
    line = next(x for x in output if x.startswith("postgres on "))
    host, _, port = line.removeprefix("postgres on ").strip().rpartition(":")
    return host, int(port)


# --- the victim ----------------------------------------------------------------------------


def victim_session(address: Address, token: str, seconds: float, queue: Any) -> None:
    """The victim's protocol session: a point SELECT of `big` every 100 ms for `seconds`.

    Puts ("pg victim", round trips in s, notes): a note for each error or reconnection.
    """
    latencies: list[float] = []
    notes: list[str] = []
    began = time.monotonic()
    until = began + seconds
    connection: Connection | None = None
    n = 0
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            if connection is None:
                connection = Connection(address, "victim", token, "demo")
                started = time.monotonic()  # the login is not the SELECT's time
            n += 1
            error = connection.run(f"SELECT id, v, name FROM big WHERE id = {n * 7919 % 1000}")
            if error:
                notes.append(f"{started - began:7.2f}s point SELECT: {error}")
            else:
                latencies.append(time.monotonic() - started)
        except (OSError, EOFError, LoginRefused) as failure:
            notes.append(f"{time.monotonic() - began:7.2f}s protocol session: {failure!r}")
            if connection is not None:
                connection.sock.close()
            connection = None
            time.sleep(0.5)
        time.sleep(max(0.0, VICTIM_EVERY - (time.monotonic() - started)))
    if connection is not None:
        connection.close()
    queue.put(("pg victim", latencies, notes))


# --- the hostile clients ---------------------------------------------------------------------


class _Tally:
    """Outcomes by name and the largest figures, shared by a process's client threads."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.most: dict[str, float] = {}
        self.lock = threading.Lock()

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def high(self, name: str, value: float) -> None:
        with self.lock:
            self.most[name] = max(self.most.get(name, 0.0), value)


def _pipeline(address: Address, token: str, until: float, tally: _Tally) -> None:
    """Batches of PIPELINE_BATCH queries sent without reading, held, then every answer read."""
    batch = b"".join(
        query(PIPELINE_SQL) if n % 2 else extended(PIPELINE_SQL) for n in range(PIPELINE_BATCH)
    )
    while time.monotonic() < until:
        try:
            connection = Connection(address, "h9", token, "demo")
        except (OSError, EOFError, LoginRefused) as failure:
            tally.count(f"pipeline login failed: {failure!r}")
            time.sleep(1.0)
            continue
        try:
            while time.monotonic() < until:
                _pipeline_batch(connection, batch, until, tally)
        except (OSError, EOFError) as failure:
            tally.count(f"pipeline connection lost: {type(failure).__name__}")
        finally:
            connection.close()


def _pipeline_batch(connection: Connection, batch: bytes, until: float, tally: _Tally) -> None:
    """One batch; at `until` it is left unread (the caller then closes the connection)."""
    sock = connection.sock
    sock.setblocking(False)
    sent = 0
    progress = time.monotonic()
    # Send until the server stops taking the queries (it reads nothing more of a connection
    # while a megabyte of its answers waits unsent) or the batch is out.
    while sent < len(batch) and time.monotonic() - progress < STALLED_AFTER:
        _, writable, _ = select.select([], [sock], [], STALLED_AFTER)
        if writable:
            try:
                sent += sock.send(batch[sent : sent + 262144])
                progress = time.monotonic()
            except BlockingIOError:
                pass
    tally.high("pipeline: bytes of queries sent before the sends stalled (most)", sent)
    time.sleep(max(0.0, min(PIPELINE_HOLD, until - time.monotonic())))
    answered = 0
    while answered < PIPELINE_BATCH:
        if time.monotonic() > until:
            tally.count("pipeline queries answered", answered)
            tally.count("pipeline batch left unread at the end")
            return
        want_write = [sock] if sent < len(batch) else []
        readable, writable, _ = select.select([sock], want_write, [], 60.0)
        if not readable and not writable:
            raise TimeoutError("no answer for 60 s")
        if writable:
            try:
                sent += sock.send(batch[sent : sent + 262144])
            except BlockingIOError:
                pass
        if readable:
            try:
                connection.receive()
            except BlockingIOError:
                continue
            while (taken := connection.take()) is not None:
                kind, body = taken
                if kind == b"Z":
                    answered += 1
                elif kind == b"E":
                    tally.count(f"pipeline error {sqlstate(body)}")
    tally.count("pipeline queries answered", answered)
    sock.settimeout(30.0)


def _copy_in(address: Address, token: str, until: float, tally: _Tally, cap: int) -> None:
    """COPY FROM STDIN into its own database's `sink`, as fast as the socket takes it, on
    and on; a COPY not refused within `cap` bytes is ended with CopyFail (nothing copied)."""
    ident = 0
    while time.monotonic() < until:
        try:
            connection = Connection(address, "h10", token, "hostile")
        except (OSError, EOFError, LoginRefused) as failure:
            tally.count(f"COPY login failed: {failure!r}")
            time.sleep(1.0)
            continue
        try:
            while time.monotonic() < until:
                ident = _one_copy(connection, ident, until, tally, cap)
        except (OSError, EOFError) as failure:
            tally.count(f"COPY connection lost: {type(failure).__name__}")
        finally:
            connection.close()


def _one_copy(connection: Connection, ident: int, until: float, tally: _Tally, cap: int) -> int:
    sock = connection.sock
    sock.sendall(query("COPY sink FROM STDIN"))
    kind, body = connection.read()
    if kind != b"G":
        tally.count(f"COPY not started: {sqlstate(body) if kind == b'E' else kind!r}")
        while kind != b"Z":
            kind, body = connection.read()
        time.sleep(1.0)
        return ident
    sock.setblocking(False)
    sent = 0
    refused = ""
    ready = False  # ReadyForQuery came: a refused COPY is over at once, as PostgreSQL's is
    pending = b""
    while not refused and sent < cap and time.monotonic() < until:
        if not pending:
            lines = []
            for _ in range(COPY_LINES_PER_MESSAGE):
                ident += 1
                lines.append(f"{ident}\t{COPY_LINE_BODY}\n")
            pending = message(b"d", "".join(lines).encode())
        readable, writable, _ = select.select([sock], [sock], [], 60.0)
        if writable:
            try:
                done = sock.send(pending)
                pending, sent = pending[done:], sent + done
            except BlockingIOError:
                pass
        if readable:
            try:
                connection.receive()
            except BlockingIOError:
                continue
            while (taken := connection.take()) is not None:
                if taken[0] == b"E":
                    refused = sqlstate(taken[1])
                ready = ready or taken[0] == b"Z"
    sock.settimeout(30.0)
    # The rest of a CopyData message that was begun, then the end of the copy (after a
    # refusal the server drops both, as any copy message until the next query).
    sock.sendall(pending)
    sock.sendall(message(b"c", b"") if refused else message(b"f", b"stopped by the benchmark\0"))
    if refused:
        tally.count(f"COPY refused {refused}")
        tally.high("COPY: MB sent before the refusal (most)", sent / 2**20)
    why = "the phase's end" if sent < cap else f"{cap / 2**20:.0f} MB, not refused"
    while not ready:
        kind, body = connection.read()
        if kind == b"E" and not refused:
            tally.count(f"COPY given up (CopyFail) at {why}; answered {sqlstate(body)}")
        elif kind == b"C":
            tally.count(f"COPY committed: {body.rstrip(bytes(1)).decode()}")
        ready = kind == b"Z"
    return ident


def _prelogin(address: Address, slow: bool, until: float, tally: _Tally) -> None:
    """One socket at a time that sends nothing (or its startup packet a byte a second) and
    is ended by the server's login deadline; another in its place, until `until`."""
    packet = startup("nobody", "demo")
    while time.monotonic() < until:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            try:
                sock.bind((PRELOGIN_SOURCE, 0))
            except OSError:
                pass  # no second loopback address here: the victim's shares the places
            sock.settimeout(10.0)
            sock.connect(address)
            opened = time.monotonic()
            sent = 0
            answer = b""
            while time.monotonic() < until:
                wait = PRELOGIN_BYTE_EVERY if slow and sent < len(packet) else 1.0
                readable, _, _ = select.select([sock], [], [], wait)
                if readable:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
                elif slow and sent < len(packet):
                    sent += sock.send(packet[sent : sent + 1])
            if answer[:1] == b"E":
                state = sqlstate(answer[5:])
                tally.count(f"prelogin ended {state}")
                if state == "53300":  # every place taken: back off, as a client would
                    time.sleep(0.5)
                tally.high(
                    "prelogin: seconds a connection was held (most)", time.monotonic() - opened
                )
            elif time.monotonic() < until:
                tally.count("prelogin closed without an error")
        except OSError as failure:
            tally.count(f"prelogin socket failed: {type(failure).__name__}")
            time.sleep(1.0)
        finally:
            sock.close()


def hostile(
    address: Address,
    tokens: dict[str, str],
    kinds: set[str],
    seconds: float,
    copy_cap: int,
    queue: Any,
) -> None:
    """The hostile protocol clients of `kinds` (pipeline, copyin, prelogin) for `seconds`.

    Puts ("pg hostile", outcomes by name, largest figures by name).
    """
    tally = _Tally()
    until = time.monotonic() + seconds
    work: list[tuple[Any, tuple[Any, ...]]] = []
    if "pipeline" in kinds:
        work += [(_pipeline, (address, tokens["h9"], until, tally))] * PIPELINE_CONNECTIONS
    if "copyin" in kinds:
        work.append((_copy_in, (address, tokens["h10"], until, tally, copy_cap)))
    if "prelogin" in kinds:
        work += [(_prelogin, (address, n % 2 == 1, until, tally)) for n in range(PRELOGIN_SOCKETS)]
    threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()) + 90)
    queue.put(("pg hostile", dict(tally.counts), dict(tally.most)))
