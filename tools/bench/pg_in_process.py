"""A prepared statement's run over the PostgreSQL protocol in process, without sockets.

The bytes psycopg sends for a prepared point SELECT or one-row INSERT (Bind, Describe of
the portal, Execute, Sync) go through `Link.answer_pending` on a logged-in connection of
an engine instance in a throwaway folder; an INSERT's acknowledgement waits as the server's
does: the log is flushed once every `--group` commits (one group commit) and each answer is
then released. The figure is the CPU time of the thread per run (no other thread runs), the
median of --repeats batches of --runs: what the server's Python costs a request, apart from
its sockets, polling and hand-overs (`per_request.py` measures those with the rest).

Two checkouts compare by running this script from each alternately, e.g.

    python tools/bench/pg_in_process.py --workload insert
    PYTHONPATH=../before python tools/bench/pg_in_process.py --workload insert

`--profile` prints the run's cProfile instead (the top functions by own time).
"""

from __future__ import annotations

import bench_path  # noqa: F401  - first: see bench_path

# isort: split

import argparse
import cProfile
import pstats
import statistics
import struct
import tempfile
import time
from pathlib import Path

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import Link, LinkOptions

ROWS = 10_000


def _frame(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def parse(name: str, text: str) -> bytes:
    return _frame(b"P", _cstr(name) + _cstr(text) + struct.pack("!h", 0))


def run_bytes(statement: str, params: list[bytes]) -> bytes:
    """Bind (text parameters, text results), Describe portal, Execute, Sync."""
    body = _cstr("") + _cstr(statement) + struct.pack("!hh", 1, 0)
    body += struct.pack("!h", len(params))
    for value in params:
        body += struct.pack("!i", len(value)) + value
    body += struct.pack("!h", 0)
    return (
        _frame(b"B", body)
        + _frame(b"D", b"P" + _cstr(""))
        + _frame(b"E", _cstr("") + struct.pack("!i", 0))
        + _frame(b"S", b"")
    )


class _NoTransport:
    def send(self, data: bytes) -> None:
        raise AssertionError("no COPY here")

    def receive(self) -> bytes:
        raise AssertionError("no COPY here")


def connect(instance: Instance) -> Link:
    """A connection logged in as the admin (a dev server's login: no password asked)."""
    link = Link(instance, LinkOptions(dev=True), 1, 1, lambda p, s: None, _NoTransport())
    body = struct.pack("!i", 196608) + _cstr("user") + _cstr("admin")
    body += _cstr("database") + _cstr("demo") + b"\0"
    link.core.receive_data(struct.pack("!i", len(body) + 4) + body)
    assert link.answer_pending().endswith(b"Z\x00\x00\x00\x05I")
    return link


def prepare(instance: Instance) -> None:
    session = instance.session("demo", Principal("admin", is_admin=True))
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    session.execute("CREATE TABLE w (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    for first in range(0, ROWS, 1000):
        values = ", ".join(f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, first + 1000))
        session.execute(f"INSERT INTO t VALUES {values}")


def batch(link: Link, workload: str, runs: int, start: int, group: int) -> float:
    """CPU seconds of this thread per run of `runs` runs."""
    core = link.core
    if workload == "select":
        messages = [run_bytes("s", [str((start + i) % ROWS).encode()]) for i in range(runs)]
    else:
        messages = [
            run_bytes("s", [str(start + i).encode(), str(i * 0.5).encode(), f"row {i}".encode()])
            for i in range(runs)
        ]
    began = time.thread_time()
    waiting = 0
    for data in messages:
        core.receive_data(data)
        out = link.answer_pending()
        assert out[-6:-1] == b"Z\x00\x00\x00\x05", out
        if not link.is_durable():
            waiting += 1
            if waiting == group:
                link.wait_durable()
                waiting = 0
    link.wait_durable()
    return (time.thread_time() - began) / runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert"), default="select")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--group", type=int, default=16, help="commits per flush")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        try:
            prepare(instance)
            link = connect(instance)
            text = (
                "SELECT * FROM t WHERE id = $1"
                if args.workload == "select"
                else "INSERT INTO w VALUES ($1, $2, $3)"
            )
            link.core.receive_data(parse("s", text) + _frame(b"S", b""))
            link.answer_pending()
            batch(link, args.workload, 500, 10**9, args.group)  # warm
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                batch(link, args.workload, args.runs, 0, args.group)
                profile.disable()
                stats = pstats.Stats(profile)
                stats.strip_dirs().sort_stats("tottime").print_stats(30)
                return
            figures = [
                batch(link, args.workload, args.runs, (n + 1) * args.runs, args.group)
                for n in range(args.repeats)
            ]
        finally:
            instance.close()
    print(
        f"{args.workload}: {1e6 * statistics.median(figures):.1f} us CPU a run (median of"
        f" {args.repeats} x {args.runs}; runs {' '.join(f'{1e6 * f:.1f}' for f in figures)})"
    )


if __name__ == "__main__":
    main()
