"""The reads off Enum classes a served request makes, by the line that makes them: exact counts.

In Python 3.11 the Enum metaclass defines `__getattr__`, so every attribute read off an Enum
class (`State.CLOSED`) goes through the slow `slot_tp_getattr_hook`: about 900 machine
instructions a read in callgrind, against a few dozen for a module constant's. Those reads
do not show as functions in an opcode count or a profile. Here the metaclass's
`__getattribute__` is replaced by a counter that delegates to `type`'s and notes the line that
read (the nearest frame outside `enum.py`), while a bench's measured part runs:

- `--bench pg`: `pg_served.py`'s served prepared point SELECT or one-row INSERT (a `PgServer`
  in process, psycopg clients in a child process), every server thread;
- `--bench http`: `http_opcodes.py`'s served `POST /exec` point SELECT or one-row INSERT (a
  `PooledWSGIServer` in process with its log writer, lean keep-alive clients in a child
  process), every server thread;
- `--bench exec`: `exec_instructions.py`'s `POST /exec` requests through the HTTP server's
  own code in process, the flusher's thread included.

The measured part is what those benches count (their switch: `instrument`, `counting`).
With `--calls`, the Python functions of `enum.py` that ran (a member's `.value` and `.name`,
`Enum.__hash__` when a member keys a dict, `Flag` operators, `State(value)`...) are counted
too, by the line outside `enum.py` that called them. Counts per request; an INSERT's differ
slightly with its group commits. Two trees compare by `PYTHONPATH=../before python ...`.
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import collections
import enum
import sys
import threading
from types import FrameType, SimpleNamespace
from typing import Any

import refimpl

_ENUM_FILE = enum.__file__
_TREE = refimpl.__file__.rsplit("/refimpl/", 1)[0] + "/"


def _where(frame: FrameType | None) -> str:
    """The first frame from `frame` outwards whose code is not enum.py's, as file:line."""
    while frame is not None and frame.f_code.co_filename == _ENUM_FILE:
        frame = frame.f_back
    if frame is None:
        return "?"
    name = frame.f_code.co_filename.removeprefix(_TREE)
    return f"{name}:{frame.f_lineno} {frame.f_code.co_name}"


class Counter:
    """Counts, while on, the reads off Enum classes and (with `calls`) enum.py's Python calls."""

    def __init__(self, calls: bool) -> None:
        self.on = False
        self.reads: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._with_calls = calls
        self._type_getattribute = type.__getattribute__

    def install(self) -> None:
        counter = self

        def __getattribute__(cls: type, name: str) -> Any:  # noqa: N807 - the hook's name
            read = counter._type_getattribute
            if counter.on:
                frame = sys._getframe(1)
                inside = " (in enum.py)" if frame.f_code.co_filename == _ENUM_FILE else ""
                key = f"{_where(frame)}  {read(cls, '__name__')}.{name}{inside}"
                with counter._lock:
                    counter.reads[key] += 1
            return read(cls, name)

        enum.EnumType.__getattribute__ = __getattribute__  # type: ignore[assignment,method-assign]
        if self._with_calls:
            threading.setprofile(self._profile)
            sys.setprofile(self._profile)

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.on or event != "call" or frame.f_code.co_filename != _ENUM_FILE:
            return
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == _ENUM_FILE:
            return  # enum.py's own calls are the cost of the outer one
        key = f"{_where(caller)}  {frame.f_code.co_qualname}"
        with self._lock:
            self.calls[key] += 1

    def instrument(self, on: bool = True, *, spin: bool = False) -> None:
        """`callgrind_run.instrument`'s stand-in: counting on or off."""
        self.on = on

    def opcode_counter(self) -> SimpleNamespace:
        """`pg_opcodes.OpcodeCounter`'s stand-in: its `counting` switches this one's counting;
        nothing traced."""
        counting = SimpleNamespace(
            set=lambda: self.instrument(True),
            clear=lambda: self.instrument(False),
            is_set=lambda: self.on,
        )
        return SimpleNamespace(counting=counting, trace=lambda *_: None, counts={})


def _print(title: str, counts: collections.Counter[str], requests: int) -> None:
    total = sum(counts.values())
    print(f"{title}: {total / requests:.2f} a request")
    for key, count in counts.most_common():
        if count / requests >= 0.005:
            print(f"  {count / requests:7.2f}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bench", choices=("pg", "http", "exec"), default="pg")
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=200, help="requests (pg: per client)")
    parser.add_argument("--clients", type=int, default=16, help="pg, http: clients")
    parser.add_argument("--calls", action="store_true", help="also enum.py's Python calls")
    args = parser.parse_args()
    counter = Counter(args.calls)
    if args.bench == "pg":
        bench = sibling("pg_served")
        bench.callgrind_run = SimpleNamespace(instrument=counter.instrument)
        counter.install()
        sys.argv = [bench.__file__, "--workload", args.workload, "--callgrind"]
        sys.argv += ["--runs", str(args.runs), "--clients", str(args.clients)]
        bench.main()
        requests = args.runs * args.clients
    elif args.bench == "http":
        bench = sibling("http_opcodes")
        opcodes = bench.pg_opcodes
        bench.pg_opcodes = SimpleNamespace(
            OpcodeCounter=counter.opcode_counter,
            make_tables=opcodes.make_tables,
            count_clients=opcodes.count_clients,
            report=lambda *_, **__: None,  # no opcodes counted
        )
        counter.install()
        sys.argv = [bench.__file__, "--workload", args.workload]
        sys.argv += ["--runs", str(args.runs), "--clients", str(args.clients)]
        bench.main()
        requests = args.runs * args.clients
    else:
        bench = sibling("exec_instructions")
        bench.callgrind_run = SimpleNamespace(instrument=counter.instrument)
        counter.install()
        warm = argparse.Namespace(workload=args.workload, runs=args.runs, warm=200, group=16)
        bench.measured(warm)
        requests = args.runs
    tree = refimpl.__file__.rsplit("/", 3)[-3]
    print(f"{tree} {args.bench} {args.workload}, {requests} requests")
    _print("reads off Enum classes (slot_tp_getattr_hook)", counter.reads, requests)
    if args.calls:
        _print("enum.py's Python calls", counter.calls, requests)


if __name__ == "__main__":
    main()
