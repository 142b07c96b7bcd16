"""The Python opcodes a PostgreSQL server's threads run per request, by thread and function.

A `PgServer` runs in this process on an engine instance in a throwaway folder; psycopg
clients in a child process (`--clients` threads, one connection each) run a prepared point
SELECT or one-row INSERT, and every opcode the server's threads run meanwhile is counted
(`threading.settrace` with opcode events); `--stages` sums them by stage (`opcode_stages`:
the request's budget). Unlike CPU time, the count does not depend on
the machine's load, so two trees compare on a busy machine too:

    python tools/bench/pg_opcodes.py --workload insert
    PYTHONPATH=../before python tools/bench/pg_opcodes.py --workload insert

It counts the whole served path, which `pg_in_process.py` leaves out: polling, reading,
sending, re-arming, the acknowledging thread and the worker that sends durable answers. It
does not see what C code and the kernel cost (system calls, waking a thread);
`per_request.py` measures those with the rest. Tracing slows the server a hundredfold, so
with several clients an INSERT's group commits gather more of them than untraced.
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer

opcode_stages = sibling("opcode_stages")

# The end of a clients' script: `clients` threads of `client(number, ready)` started, each
# warmed up, then all told to go on stdin; what the script prints when they end follows it.
CLIENT_TAIL = """\nready = threading.Semaphore(0)
threads = [threading.Thread(target=client, args=(n, ready)) for n in range(clients)]
for thread in threads:
    thread.start()
for _ in threads:
    ready.acquire()
print("ready", flush=True)
sys.stdin.readline()
go.set()
for thread in threads:
    thread.join()
"""

# The clients: warmed up (statements prepared, caches filled), then told to go on stdin.
CLIENT = r"""
import sys, threading, psycopg
port, workload, clients, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
go = threading.Event()
def client(number, ready):
    conninfo = f"host=127.0.0.1 port={port} user=admin dbname=demo"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        def run(i):
            if workload == "select":
                conn.execute("SELECT * FROM t WHERE id = %s", (i % 100,), prepare=True).fetchall()
            else:
                key = (number + 1) * 10**9 + i
                conn.execute("INSERT INTO w VALUES (%s, %s, %s)", (key, 0.5, "x"), prepare=True)
        for i in range(20):
            run(-1 - i)
        ready.release()
        go.wait()
        for i in range(runs):
            run(i)
"""
CLIENT += CLIENT_TAIL + 'print("done", flush=True)\n'


class OpcodeCounter:
    """Counts opcodes by (thread group, file, function) while `counting` is set."""

    def __init__(self) -> None:
        self.counting = threading.Event()
        self.counts: collections.Counter[tuple[str, str, str]] = collections.Counter()

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.counting.is_set():
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        # kdb-pg-3 and kdb-pg-12 are one group: the workers.
        group = re.sub(r"-\d+$", "", threading.current_thread().name)
        key = (group, Path(frame.f_code.co_filename).name, frame.f_code.co_name)
        counts, counting = self.counts, self.counting

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode" and counting.is_set():
                counts[key] += 1
            return local

        return local


def make_tables(session: Session) -> None:
    """The workloads' tables: t of 100 rows to read, w to insert into."""
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    rows = ", ".join(f"({i}, {i * 0.25}, 'row {i}')" for i in range(100))
    session.execute(f"INSERT INTO t VALUES {rows}")


def count_clients(counter: OpcodeCounter, command: list[str]) -> None:
    """Runs the clients' script `command` (a CLIENT ending in CLIENT_TAIL), counting from
    its go until half a second after it printed its last line ("done" when all went well)."""
    clients = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert clients.stdin is not None and clients.stdout is not None
    if clients.stdout.readline().strip() != "ready":
        raise SystemExit("the clients did not start")
    counter.counting.set()
    clients.stdin.write("go\n")
    clients.stdin.flush()
    finished = clients.stdout.readline().strip()
    time.sleep(0.5)  # the last rounds (acknowledgements, the flusher, the log writer) end
    counter.counting.clear()
    clients.wait()
    if finished != "done":
        raise SystemExit(f"the clients failed ({finished or 'no answer'})")


def report(
    counter: OpcodeCounter, workload: str, requests: int, top: int, stages: bool = False
) -> None:
    """Prints the opcodes a request: in all, by thread group and by function (`top` of them);
    with `stages`, by stage (`opcode_stages`) instead of by function."""
    counts = counter.counts
    print(f"{workload}: {sum(counts.values()) / requests:.0f} opcodes a request")
    if stages:
        opcode_stages.print_stages(((file, n) for (_, file, _), n in counts.items()), requests)
        return
    groups: collections.Counter[str] = collections.Counter()
    for (group, _, _), count in counts.items():
        groups[group] += count
    for group, count in groups.most_common():
        print(f"  {count / requests:8.1f}  thread {group}")
    for (group, file, function), count in counts.most_common(top):
        print(f"  {count / requests:8.1f}  {file}:{function} ({group})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=1000, help="requests per client")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    parser.add_argument("--stages", action="store_true", help="by stage, not by function")
    args = parser.parse_args()
    counter = OpcodeCounter()
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        server: PgServer | None = None
        try:
            session = instance.session("demo", Principal("admin", is_admin=True))
            make_tables(session)
            threading.settrace(counter.trace)  # the server's threads, started below
            server = PgServer(instance, PgOptions(port=0, link=LinkOptions(dev=True)))
            server.start()
            command = [sys.executable, "-c", CLIENT, str(server.address[1])]
            command += [args.workload, str(args.clients), str(args.runs)]
            count_clients(counter, command)
        finally:
            threading.settrace(None)  # threads started from now on are not traced
            if server is not None:
                server.stop()
            instance.close()
    report(counter, args.workload, args.runs * args.clients, args.top, args.stages)


if __name__ == "__main__":
    main()
