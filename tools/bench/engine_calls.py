"""The engine's one-statement path alone: what `/exec` and the PostgreSQL protocol both call.

A point SELECT, a one-row INSERT, a SELECT without FROM (`--workload constants`:
`SELECT 1, 2.5, 'x'`, the same text every time), one calling the session's functions
(`--workload session`: `version()`, `current_setting`, `current_user`, as drivers send at
connect) or a catalog SELECT (`--workload catalog`) goes from a `Session` to the table and the
log as the protocol layers send it: `--path exec` runs `Session.execute` of a text with its
constants written in (what `POST /exec` calls; each text new, a key of its own), `--path
prepared` runs `Session.run_prepared` of one prepared statement with parameters (what a
protocol client's Bind/Execute calls). One session, `acknowledge_later` as both servers open
it, on a thread that holds an admission place as a server's worker does; an INSERT's commits
are flushed once every `--group` (one group commit), as the servers' acknowledgements wait
for them. No sockets, no framing, no answer's encoding: those are the
protocol layers' (`exec_in_process.py`, `pg_in_process.py`).

Figures:
- by default, the thread CPU time per statement (median of --repeats batches of --runs);
- `--opcodes`: the Python opcodes per statement, by function (`--top`), load-independent;
- `--instructions`: the machine instructions per statement, counted by valgrind's
  callgrind in C and Python alike: this script runs itself under callgrind, which counts
  only the batch of --runs statements on this thread (not the imports nor the setup; a
  commit's flush is led by this thread). The same count run after run (within 0.3%)
  whatever the machine's load; a run takes about a minute.

Two checkouts compare by running this script from each (PYTHONPATH naming the other):

    python tools/bench/engine_calls.py --workload select --path prepared --instructions
    PYTHONPATH=../before python tools/bench/engine_calls.py --workload select ...
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import refimpl
from refimpl.engine import admission
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.netpool.places import FifoSlots

ROWS = 2_000
ADMIN = Principal("admin", is_admin=True)
opcode_stages = sibling("opcode_stages")
callgrind_run = sibling("callgrind_run")


def prepare(instance: Instance) -> None:
    session = instance.session("demo", ADMIN)
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    rows = [(i, i * 0.25, f"row {i}") for i in range(ROWS)]
    session.insert_rows("t", ["id", "v", "s"], rows)
    session.close()


# The `constants` workload: a SELECT without FROM, the same text every time (a driver's
# health check, `SELECT 1`, and the simple-query bench's `pg-simple-constants`).
CONSTANTS = "SELECT 1, 2.5, 'x'"

# The `session` workload: what drivers and shells send at connect, calling the session's
# functions (psql's and pgcli's version and settings, SQLAlchemy's current_schema()); the
# `catalog` workload: a catalog function over a catalog table, as psql's `\dt` reads one.
SESSION = (
    "SELECT version(), current_setting('server_version_num'), current_user(), current_schema()"
)
CATALOG = "SELECT pg_get_userbyid(relowner) FROM pg_catalog.pg_class WHERE relname = 't'"
TEXTS = {"constants": CONSTANTS, "session": SESSION, "catalog": CATALOG}


def runner(session: Session, workload: str, path: str) -> Callable[[int], object]:
    """What runs statement number `n` of the workload, the way `path` calls the engine."""
    if workload in TEXTS:
        text = TEXTS[workload]
        if path == "exec":
            return lambda n: session.execute(text)
        constants = session.prepare(text)
        assert constants is not None
        return lambda n: session.run_prepared(constants, ())
    if path == "prepared":
        text = (
            "SELECT * FROM t WHERE id = ?"
            if workload == "select"
            else "INSERT INTO w VALUES (?, ?, ?)"
        )
        prepared = session.prepare(text)
        assert prepared is not None
        run_prepared = session.run_prepared
        if workload == "select":
            return lambda n: run_prepared(prepared, (n % ROWS,))
        return lambda n: run_prepared(prepared, (n, n * 0.5, f"row {n}"))
    execute = session.execute
    if workload == "select":
        return lambda n: execute(f"SELECT * FROM t WHERE id = {n % ROWS}")
    return lambda n: execute(f"INSERT INTO w VALUES ({n}, {n * 0.5}, 'row {n}')")


def batch(
    session: Session, run: Callable[[int], object], runs: int, start: int, group: int
) -> None:
    waiting = 0
    for n in range(start, start + runs):
        run(n)
        if not session.is_durable():
            waiting += 1
            if waiting == group:
                session.wait_durable()
                waiting = 0
    session.wait_durable()


def count_opcodes(
    session: Session, run: Callable[[int], object], runs: int, start: int, group: int, top: int
) -> None:
    counts = opcode_stages.opcodes_by_function(lambda: batch(session, run, runs, start, group))
    print(f"{sum(counts.values()) / runs:.0f} Python opcodes a statement")
    for (name, file), count in counts.most_common(top):
        print(f"{count / runs:8.1f}  {name} ({file})")


def instructions(args: argparse.Namespace) -> None:
    """Run this script under callgrind; print its count of the batch's instructions a
    statement (only `batch`'s, within `callgrind_run.counted`: nothing of the engine's path
    calls `functools.reduce`)."""
    arguments = ["--workload", args.workload, "--path", args.path, "--group", str(args.group)]
    arguments += ["--runs", str(args.runs), "--once"]
    counted = callgrind_run.total(__file__, arguments, within_reduce=True)
    per = counted / args.runs
    tree = Path(refimpl.__file__).parent.parent.name
    print(f"{tree} {args.workload} {args.path}: {per:,.0f} instructions a statement")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert", *TEXTS), default="select")
    parser.add_argument("--path", choices=("exec", "prepared"), default="prepared")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--group", type=int, default=16, help="INSERT commits per flush")
    parser.add_argument("--opcodes", action="store_true", help="count Python opcodes instead")
    parser.add_argument("--top", type=int, default=40, help="functions --opcodes lists")
    callgrind_run.add_arguments(parser)
    args = parser.parse_args()
    if args.instructions:
        instructions(args)
        return
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        try:
            prepare(instance)
            # This thread holds an admission place, as a server's worker does while it
            # serves (`netpool.polling`): a statement's admission is then the server's.
            places = FifoSlots(4, 2)
            places.acquire()
            admission.admitted(places.release, places)
            session = instance.session("demo", ADMIN, acknowledge_later=True)
            run = runner(session, args.workload, args.path)
            start = 10**9
            batch(session, run, 200, start, args.group)  # warm
            start += 200
            if args.once:
                callgrind_run.instrument(spin=True)  # no other thread runs
                callgrind_run.counted(lambda: batch(session, run, args.runs, start, args.group))
                return
            if args.opcodes:
                count_opcodes(session, run, args.runs, start, args.group, args.top)
                return
            figures = []
            for _ in range(args.repeats):
                began = time.thread_time()
                batch(session, run, args.runs, start, args.group)
                figures.append((time.thread_time() - began) / args.runs)
                start += args.runs
        finally:
            instance.close()
    shown = " ".join(f"{1e6 * f:.1f}" for f in figures)
    tree = Path(refimpl.__file__).parent.parent.name
    print(
        f"{tree} {args.workload} {args.path}: {1e6 * statistics.median(figures):.1f} us CPU a"
        f" statement (median of {args.repeats} x {args.runs}: {shown})"
    )


if __name__ == "__main__":
    main()
