"""What a served PostgreSQL request costs the server, C and kernel included, load aside.

A `PgServer` runs in this process on an engine instance in a throwaway folder; psycopg
clients in a child process (`--clients` threads, one connection each, `pg_opcodes`' client)
run `--runs` prepared point SELECTs or one-row INSERTs each after a warm-up. Over exactly
those requests the script prints, per request: the process's CPU (all its threads: user
and system), its threads' context switches (voluntary and not) and, with `--strace`, the
system calls by name (`strace -c -f` attached for the measured part only). None of these
depend much on the machine's load, unlike a rate.

Under callgrind, the instructions of the measured part alone (instrumentation is switched on
at the go and off after the last answer, with `callgrind_control`):

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=OUT \\
        python tools/bench/pg_served.py --workload select --runs 200 --callgrind
    callgrind_annotate OUT | head -60

Two checkouts compare by running this script from each (`PYTHONPATH=../before python ...`).
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer

# The clients and the tables are `pg_opcodes`'.
pg_opcodes = sibling("pg_opcodes")
callgrind_run = sibling("callgrind_run")


def thread_counts() -> tuple[float, float, int, int]:
    """This process's user and system CPU seconds, and its threads' voluntary and
    involuntary context switches so far (those of threads that ended are not counted)."""
    times = os.times()
    voluntary = involuntary = 0
    for task in os.listdir("/proc/self/task"):
        try:
            status = Path(f"/proc/self/task/{task}/status").read_text()
        except OSError:
            continue  # ended meanwhile
        voluntary += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M)[1])  # type: ignore[index]
        involuntary += int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M)[1])  # type: ignore[index]
    return times.user, times.system, voluntary, involuntary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=2000, help="requests per client")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--threads", type=int, default=16, help="server worker threads")
    parser.add_argument("--strace", action="store_true", help="system calls by name")
    parser.add_argument(
        "--callgrind", action="store_true", help="run under callgrind: count the measured part"
    )
    args = parser.parse_args()
    requests = args.runs * args.clients
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        server: PgServer | None = None
        strace: subprocess.Popen[str] | None = None
        try:
            pg_opcodes.make_tables(instance.session("demo", Principal("admin", is_admin=True)))
            options = PgOptions(port=0, threads=args.threads, link=LinkOptions(dev=True))
            server = PgServer(instance, options)
            server.start()
            command = [sys.executable, "-c", pg_opcodes.CLIENT, str(server.address[1])]
            command += [args.workload, str(args.clients), str(args.runs)]
            clients = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert clients.stdin is not None and clients.stdout is not None
            if clients.stdout.readline().strip() != "ready":
                raise SystemExit("the clients did not start")
            if args.strace:
                strace = subprocess.Popen(
                    ["strace", "-c", "-f", "-p", str(os.getpid())],
                    stderr=subprocess.PIPE,
                    text=True,
                )
                time.sleep(1.0)  # attached to every thread
            before, began = thread_counts(), time.monotonic()
            if args.callgrind:
                callgrind_run.instrument(True)
            clients.stdin.write("go\n")
            clients.stdin.flush()
            finished = clients.stdout.readline().strip()
            if args.callgrind:
                callgrind_run.instrument(False)
            after, seconds = thread_counts(), time.monotonic() - began
            if strace is not None:
                strace.send_signal(2)
                _, calls = strace.communicate()
            clients.wait()
            if finished != "done":
                raise SystemExit(f"the clients failed ({finished or 'no answer'})")
        finally:
            if strace is not None and strace.poll() is None:
                strace.kill()
            if server is not None:
                server.stop()
            instance.close()
    user, system, voluntary, involuntary = (b - a for a, b in zip(before, after, strict=True))
    print(
        f"{args.workload}: {requests} requests in {seconds:.2f} s;"
        f" CPU {1e6 * (user + system) / requests:.1f} us a request"
        f" (user {1e6 * user / requests:.1f}, system {1e6 * system / requests:.1f});"
        f" switches {voluntary / requests:.2f} voluntary, {involuntary / requests:.2f}"
        " involuntary a request"
    )
    if strace is not None:
        print("system calls a request (strace -c -f over the measured part):")
        for line in calls.splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[3].isdigit():
                name = fields[-1]
                print(f"  {int(fields[3]) / requests:6.2f}  {name}")


if __name__ == "__main__":
    main()
