"""The PostgreSQL protocol's simple query in process, without sockets: where the CPU of a
text sent whole goes, apart from the sends and wake-ups `simple_query.py` measures with it.

A Query message (what psycopg sends for a text it does not prepare, psql for every line)
goes through `Link.answer_pending` on a logged-in connection of an engine instance in a
throwaway folder. Workloads (those of `simple_query.py`, and one of the session's
functions):
- `constants`: `SELECT 1, 2.5, 'x'`, the same text every time;
- `select`: a point SELECT of a 10,000-row table with its key in the text;
- `session`: `SELECT version(), current_setting(...)`, what drivers send at connect.

Figures:
- by default, the thread CPU time per query (median of --repeats batches of --runs);
- `--opcodes`: Python opcodes per query, by function (`--top`), load-independent;
- `--instructions`: machine instructions per query counted by callgrind (C and Python
  alike, this thread's batch only), the same run after run whatever the load.

Two checkouts compare by running this script from each (PYTHONPATH naming the other):

    python tools/bench/simple_in_process.py --workload select --instructions
    PYTHONPATH=../before python tools/bench/simple_in_process.py --workload select ...
"""

from __future__ import annotations

import bench_path  # noqa: F401  - first: see bench_path

# isort: split

import argparse
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import refimpl
from refimpl.engine.instance import Instance
from refimpl.pgwire.link import Link

pg_in_process = bench_path.sibling("pg_in_process")
callgrind_run = bench_path.sibling("callgrind_run")
opcode_stages = bench_path.sibling("opcode_stages")

TEXTS: dict[str, Callable[[int], str]] = {
    "constants": lambda n: "SELECT 1, 2.5, 'x'",
    "select": lambda n: f"SELECT * FROM t WHERE id = {n % pg_in_process.ROWS}",
    "session": lambda n: "SELECT version(), current_setting('server_version_num')",
}


def query(text: str) -> bytes:
    body = text.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


def batch(link: Link, workload: str, runs: int, start: int) -> None:
    core, answer, text = link.core, link.answer_pending, TEXTS[workload]
    for data in [query(text(n)) for n in range(start, start + runs)]:
        core.receive_data(data)
        out = answer()
        assert out[-6:-1] == b"Z\x00\x00\x00\x05", out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=tuple(TEXTS), default="constants")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opcodes", action="store_true", help="count Python opcodes instead")
    parser.add_argument("--top", type=int, default=40, help="functions --opcodes lists")
    callgrind_run.add_arguments(parser)
    args = parser.parse_args()
    tree = Path(refimpl.__file__).parent.parent.name
    if args.instructions:
        arguments = ["--workload", args.workload, "--runs", str(args.runs), "--once"]
        counted = callgrind_run.total(__file__, arguments, within_reduce=True)
        print(f"{tree} {args.workload}: {counted / args.runs:,.0f} instructions a query")
        return
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        try:
            pg_in_process.prepare(instance)
            link = pg_in_process.connect(instance)
            batch(link, args.workload, 300, 10**6)  # warm
            if args.once:
                callgrind_run.instrument(spin=True)  # no other thread runs
                callgrind_run.counted(lambda: batch(link, args.workload, args.runs, 0))
                return
            if args.opcodes:
                counts = opcode_stages.opcodes_by_function(
                    lambda: batch(link, args.workload, args.runs, 0)
                )
                print(f"{sum(counts.values()) / args.runs:.0f} Python opcodes a query")
                for (name, file), count in counts.most_common(args.top):
                    print(f"{count / args.runs:8.1f}  {name} ({file})")
                return
            figures = []
            for number in range(args.repeats):
                began = time.thread_time()
                batch(link, args.workload, args.runs, number * args.runs)
                figures.append((time.thread_time() - began) / args.runs)
        finally:
            instance.close()
    shown = " ".join(f"{1e6 * f:.1f}" for f in figures)
    print(
        f"{tree} {args.workload}: {1e6 * statistics.median(figures):.1f} us CPU a query"
        f" (median of {args.repeats} x {args.runs}: {shown})"
    )


if __name__ == "__main__":
    main()
