"""Machine instructions a `POST /exec` request costs, C and Python alike, whatever the load.

`exec_in_process.py`'s requests (a point SELECT or a one-row INSERT of a lean keep-alive
client, through `Connection.serve_one` on loopback sockets, an INSERT's answer sent once its
group commit is durable) run under valgrind's callgrind, which counts the instructions of
every thread of the process (the flusher's that leads an INSERT's group commit included)
from the first measured request to the last answer read: not the imports, the setup or the
warm-up. The requests' thread holds an admission place, as a server's worker does. A
SELECT's count is the same run after run within about 0.5% (an INSERT's within a few
percent: its groups vary), so two trees compare on a loaded machine:

    python tools/bench/exec_instructions.py --workload select
    PYTHONPATH=../before python tools/bench/exec_instructions.py --workload select

`--keep FILE` keeps callgrind's output for `callgrind_annotate FILE` (where they go).
A run takes about a minute.
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import gc
import logging
import tempfile
from pathlib import Path
from typing import Any

import refimpl
from refimpl.engine import admission
from refimpl.engine.instance import Instance
from refimpl.http.app import App, AppOptions
from refimpl.netpool.places import FifoSlots

# The clients and the workloads are `exec_in_process`'.
exec_in_process = sibling("exec_in_process")
callgrind_run = sibling("callgrind_run")


def measured(args: argparse.Namespace) -> None:
    """The run under callgrind: setup and warm-up uncounted, then `--runs` requests."""
    logging.getLogger("refimpl.requests").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        token = instance.access.ensure_admin()
        assert token is not None
        exec_in_process.prepare(instance)
        app = App(instance, AppOptions())
        lines: list[Any] = []
        app.request_log.write_lines_to(lines.append)  # made, not written
        clients = exec_in_process.Clients(app, args.group)
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)  # as `refimpl serve` sets it
        # This thread holds an admission place, as a server's worker does.
        places = FifoSlots(4, 2)
        places.acquire()
        admission.admitted(places.release, places)
        try:
            exec_in_process.batch(clients, token, args.workload, args.warm, 0)
            callgrind_run.instrument(True)  # every thread counted from here
            exec_in_process.batch(clients, token, args.workload, args.runs, args.warm)
            callgrind_run.instrument(False)
        finally:
            clients.close()
            app.begin_shutdown()
            instance.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--warm", type=int, default=400, help="uncounted requests first")
    parser.add_argument("--group", type=int, default=16, help="connections (INSERT: a group)")
    parser.add_argument("--keep", help="keep callgrind's output in this file")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        measured(args)
        return
    arguments = ["--inside", "--workload", args.workload, "--runs", str(args.runs)]
    arguments += ["--warm", str(args.warm), "--group", str(args.group)]
    counted = callgrind_run.total(__file__, arguments, keep=args.keep)
    per = counted / args.runs
    tree = Path(refimpl.__file__).parent.parent.name
    print(f"{tree} {args.workload}: {per:,.0f} instructions a request")


if __name__ == "__main__":
    main()
