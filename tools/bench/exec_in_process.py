"""A `POST /exec` request through the HTTP server's own code in process, on loopback sockets.

The bytes a lean keep-alive client sends for a point SELECT or a one-row INSERT (Bearer
token, text/plain SQL) go through `Connection.request_ready` and `Connection.serve_one`, the
path a worker of `refimpl serve` runs (httptools framing, the app, the answer's bytes and
its send), over an engine instance in a throwaway folder with a real admin token. An
INSERT's answer is parked until its commit is durable, as the server's is: the flusher's
thread leads the group commit, and each answer is sent once decided (`--group` connections
take one request each, then all their answers are awaited: one group commit). The request
log's lines are made and counted as the server's, not written (the server's log thread's
work is not this thread's).

The figure is the CPU time of this thread per request, the median of --repeats batches of
--runs: the Python of a request on its worker (not the epoll loop, the admission places or
the flusher's thread; `per_request.py` measures those with the rest). `--profile` prints the
run's cProfile instead (top functions by own time).
`--opcodes` counts the Python opcodes this thread runs per request instead (the total and
the --top functions by their own): the same on a busy machine as on a quiet one, so a change
of the request's Python shows however loaded the machine is (what it costs in C and in the
kernel does not show there; the CPU time and `per_request.py` show it); with `--stages`,
summed by stage (`opcode_stages`: the request's budget).

Two checkouts compare by running this script from each alternately:

    python tools/bench/exec_in_process.py --workload select
    PYTHONPATH=../before python tools/bench/exec_in_process.py --workload select
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import cProfile
import gc
import logging
import pstats
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import refimpl
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.app import App, AppOptions
from refimpl.http.serving.connection import Connection
from refimpl.http.serving.limits import ConnectionCounts, ConnectionLimits

opcode_stages = sibling("opcode_stages")

ROWS = 10_000


class _Host:
    """What a connection uses of its server (`connection.Host`)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.server_address = ("127.0.0.1", 9000)
        self.max_body_bytes = 64 << 20
        self.counts = ConnectionCounts(ConnectionLimits())


def request_bytes(sql: str, token: str) -> bytes:
    body = sql.encode()
    return (
        f"POST /exec HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nUser-Agent: lean\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def prepare(instance: Instance) -> None:
    session = instance.session("demo", Principal("admin", is_admin=True))
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    for first in range(0, ROWS, 1000):
        values = ", ".join(f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, first + 1000))
        session.execute(f"INSERT INTO t VALUES {values}")
    session.close()


class Clients:
    """`count` connections of one server, each a socket pair: ours and the client's end."""

    def __init__(self, app: App, count: int) -> None:
        host = _Host(app)
        self.pairs: list[tuple[Connection, socket.socket]] = []
        # Loopback TCP, as the server's (a socket pair would refuse TCP_NODELAY).
        with socket.create_server(("127.0.0.1", 0)) as listening:
            for _ in range(count):
                theirs = socket.create_connection(listening.getsockname())
                ours, address = listening.accept()
                self.pairs.append((Connection(ours, address, host), theirs))

    def serve(self, index: int, data: bytes) -> None:
        """Send `data` from client `index`, serve it, and (a parked INSERT) wait for it."""
        connection, theirs = self.pairs[index]
        theirs.sendall(data)
        assert connection.request_ready()
        assert connection.serve_one()

    def finish(self, index: int) -> None:
        """Send a parked answer once decided; read the answer the client got."""
        connection, theirs = self.pairs[index]
        parked = connection.parked
        if parked is not None:
            connection.parked = None
            answer = parked.wait()
            data, _ = connection.decided_answer(answer)
            connection.connection.sendall(data)
        got = theirs.recv(65536)
        assert got.startswith(b"HTTP/1.1 200"), got[:300]

    def close(self) -> None:
        for connection, theirs in self.pairs:
            theirs.close()
            connection.close()


def statements(workload: str, runs: int, start: int) -> list[str]:
    if workload == "select":
        return [f"SELECT * FROM t WHERE id = {(start + i) % ROWS}" for i in range(runs)]
    return [f"INSERT INTO w VALUES ({start + i}, {i * 0.5}, 'row {i}')" for i in range(runs)]


def batch(clients: Clients, token: str, workload: str, runs: int, start: int) -> float:
    """CPU seconds of this thread per request of `runs` requests."""
    group = len(clients.pairs)
    messages = [request_bytes(sql, token) for sql in statements(workload, runs, start)]
    began = time.thread_time()
    for first in range(0, runs, group):
        chunk = messages[first : first + group]
        for index, data in enumerate(chunk):
            clients.serve(index, data)
        for index in range(len(chunk)):
            clients.finish(index)
    return (time.thread_time() - began) / runs


def count_opcodes(
    clients: Clients,
    token: str,
    workload: str,
    runs: int,
    start: int,
    top: int,
    stages: bool = False,
) -> None:
    """Print the Python opcodes this thread runs per request of one batch: the total, then
    the functions that run the most of them themselves (a dataclass's generated __init__
    named by its caller), or with `stages` the sums by stage (`opcode_stages`). The
    answer's parked wait runs on the flusher's thread: not here."""
    counts = opcode_stages.opcodes_by_function(lambda: batch(clients, token, workload, runs, start))
    print(f"{workload}: {sum(counts.values()) / runs:.0f} Python opcodes per request")
    if stages:
        opcode_stages.print_stages(((file, n) for (_, file), n in counts.items()), runs)
        return
    for (name, file), count in counts.most_common(top):
        print(f"{count / runs:8.1f}  {name} ({file})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--group", type=int, default=16, help="connections (INSERT: a group)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--opcodes", action="store_true", help="count Python opcodes instead")
    parser.add_argument("--stages", action="store_true", help="--opcodes by stage")
    parser.add_argument("--sort", default="tottime", help="--profile's order (cumulative...)")
    parser.add_argument(
        "--top", type=int, default=30, help="functions shown (--profile, --opcodes)"
    )
    args = parser.parse_args()
    logging.getLogger("refimpl.requests").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        token = instance.access.ensure_admin()
        assert token is not None
        prepare(instance)
        app = App(instance, AppOptions())
        lines: list[Any] = []
        app.request_log.write_lines_to(lines.append)  # made, not written (see above)
        clients = Clients(app, args.group)
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)  # as `refimpl serve` sets it
        try:
            start = 0
            batch(clients, token, args.workload, args.runs, start)  # warm-up
            start += args.runs
            if args.opcodes:
                count_opcodes(
                    clients, token, args.workload, args.runs, start, args.top, args.stages
                )
                return
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                batch(clients, token, args.workload, args.runs, start)
                profiler.disable()
                pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
                return
            figures = []
            for _ in range(args.repeats):
                figures.append(batch(clients, token, args.workload, args.runs, start))
                start += args.runs
                lines.clear()
            shown = " ".join(f"{1e6 * f:.1f}" for f in figures)
            tree = Path(refimpl.__file__).parent.parent.name
            print(
                f"{tree} {args.workload}: {1e6 * statistics.median(figures):.1f} us CPU per request"
                f" (median of {args.repeats} x {args.runs}: {shown})"
            )
        finally:
            clients.close()
            app.begin_shutdown()
            instance.close()


if __name__ == "__main__":
    main()
