"""`GET /api/changes` pages through the HTTP server's own code in process, on loopback sockets.

A lean keep-alive client's page requests (`format=json|sse&wait=0&limit=<page>&from=<next>`,
each from the `next` of the one before) go through `Connection.request_ready` and
`Connection.serve_one`, the path a worker of `refimpl serve` runs (framing, the route, the
read and its encoding, the answer's send), over an engine instance in a throwaway folder
holding --rows rows of `t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)` committed in
transactions of --txn-rows (as `changes_read.py`'s). The client's end takes each answer whole
(its socket's buffer holds a page; what the server's socket did not take at once is sent on
as the server's loop would) before the next request. Every pass reads all the rows again with
the shared answers emptied first, so that each page is read and encoded, never found made.

Per page, for the serving thread alone (load-independent but for the last): its minor page
faults and voluntary switches (`getrusage(RUSAGE_THREAD)`), the pauses `make_way` took
(`time.sleep` calls made on it, and the seconds they asked for and took), and its CPU time
(`time.thread_time`), the medians of --passes passes. `--instructions` counts the machine
instructions of that thread's pages instead (callgrind, only the calls made within
`callgrind_run.counted`: not the client's reads): the same run after run whatever the load.

Two checkouts compare by running this script from each:

    python tools/bench/changes_in_process.py --page 10000 --format json
    PYTHONPATH=../before python tools/bench/changes_in_process.py --page 10000 --format json
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import gc
import logging
import re
import resource
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import refimpl
from refimpl import native_memory
from refimpl.engine import admission
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.app import App, AppOptions
from refimpl.http.serving.connection import Connection
from refimpl.netpool.places import FifoSlots

callgrind_run = sibling("callgrind_run")
exec_in_process = sibling("exec_in_process")  # its stand-in server (`_Host`)

_NEXT = {"json": re.compile(rb'"next":(\d+)'), "sse": re.compile(rb"id: (\d+)\n")}


def prepare(instance: Instance, rows: int, txn_rows: int) -> None:
    session = instance.session("demo", Principal("admin", is_admin=True))
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    for first in range(0, rows, txn_rows):
        last = min(first + txn_rows, rows)
        values = ", ".join(f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, last))
        session.execute(f"INSERT INTO t VALUES {values}")
    session.close()


class Client:
    """One keep-alive connection: the server's end (a `Connection`) and the client's."""

    def __init__(self, app: App) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listening:
            self.theirs = socket.socket()
            # Room for a whole page (1.4 MB at 10,000 rows), as loopback's autotuning gives.
            self.theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.theirs.connect(listening.getsockname())
            ours, address = listening.accept()
        self.connection = Connection(ours, address, exec_in_process._Host(app))
        self.buffer = bytearray(8 << 20)

    def serve(self, data: bytes) -> None:
        """The server's side of one request: the part measured."""
        self.theirs.sendall(data)
        assert self.connection.request_ready()
        assert self.connection.serve_one()

    def answer(self) -> bytes:
        """The answer's body, read whole (what the server kept is sent on meanwhile)."""
        view = memoryview(self.buffer)
        got = 0
        length = -1
        while length < 0 or got < length:
            rest = self.connection.rest
            if rest:
                sent = self.connection.connection.send(rest, socket.MSG_DONTWAIT)
                self.connection.rest = rest[sent:]
            got += self.theirs.recv_into(view[got:])
            if length < 0 and (end := self.buffer.find(b"\r\n\r\n", 0, got)) >= 0:
                head = bytes(self.buffer[:end])
                assert head.startswith(b"HTTP/1.1 200"), head
                found = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)
                assert found is not None
                length = end + 4 + int(found.group(1))
                body_at = end + 4
        return bytes(self.buffer[body_at:length])

    def close(self) -> None:
        self.theirs.close()
        self.connection.close()


def page_request(fmt: str, page: int, after: int, token: str) -> bytes:
    return (
        f"GET /api/changes?table=t&format={fmt}&wait=0&limit={page}&from={after} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:9000\r\nUser-Agent: lean\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()


@dataclass
class Pauses:
    """`time.sleep` calls made on the serving thread (`make_way`'s pauses)."""

    calls: int = 0
    asked: float = 0.0
    took: float = 0.0


def counting_sleep(pauses: Pauses, thread: int) -> Any:
    sleep = time.sleep

    def counted(seconds: float) -> None:
        if threading.get_ident() != thread:
            sleep(seconds)
            return
        began = time.perf_counter()
        sleep(seconds)
        pauses.took += time.perf_counter() - began
        pauses.calls += 1
        pauses.asked += seconds

    return counted


def read_all(
    app: App, client: Client, token: str, fmt: str, page: int, rows: int, measure: bool = False
) -> list[dict[str, float]]:
    """One pass over every row, page by page, the shared answers emptied first; with
    `measure`, each page's figures (see the module's text)."""
    app.shared_answers = type(app.shared_answers)(
        max_bytes=app.shared_answers._max_bytes, weigh=app.shared_answers._weigh
    )
    after, seen, figures = 0, 0, []
    pauses = Pauses()
    while seen < rows:
        data = page_request(fmt, page, after, token)
        if measure:
            before = resource.getrusage(resource.RUSAGE_THREAD)
            calls, took = pauses.calls, pauses.took
            cpu = time.thread_time()
            time.sleep, kept = counting_sleep(pauses, threading.get_ident()), time.sleep
            try:
                client.serve(data)
            finally:
                time.sleep = kept
            cpu = time.thread_time() - cpu
            after_use = resource.getrusage(resource.RUSAGE_THREAD)
            figures.append(
                {
                    "faults": after_use.ru_minflt - before.ru_minflt,
                    "switches": after_use.ru_nvcsw - before.ru_nvcsw,
                    "pauses": pauses.calls - calls,
                    "paused_ms": 1e3 * (pauses.took - took),
                    "cpu_ms": 1e3 * cpu,
                }
            )
        else:
            client.serve(data)
        body = client.answer()
        counted = body.count(b'"op":"upsert"')
        assert counted, body[-300:]
        seen += counted
        after = int(_NEXT[fmt].findall(body)[-1])
    return figures


def setup(args: argparse.Namespace, folder: str) -> tuple[Instance, App, Client, str, Any]:
    # The allocator as `refimpl serve` sets it: a block of 128 KB or more (an encoded chunk
    # of 1,000 changes, a joined page) gets fresh pages from the system, faulted in anew.
    native_memory.bound_arenas()
    native_memory.fix_mmap_threshold()
    logging.getLogger("refimpl.requests").setLevel(logging.INFO)
    instance = Instance.open(Path(folder))
    token = instance.access.ensure_admin()
    assert token is not None
    prepare(instance, args.rows, args.txn_rows)
    app = App(instance, AppOptions())
    lines: list[Any] = []
    app.request_log.write_lines_to(lines.append)  # made, not written
    client = Client(app)
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)  # as `refimpl serve` sets it
    return instance, app, client, token, lines


def on_worker(work: Callable[[], None]) -> None:
    """`work()` on a thread of its own, as a server's worker runs a request: its memory
    comes from an arena of its own, not the main thread's (whose freed pages stay mapped)."""
    errors: list[BaseException] = []

    def run() -> None:
        # The thread holds an admission place, as a server's worker does.
        places = FifoSlots(4, 2)
        places.acquire()
        admission.admitted(places.release, places)
        try:
            work()
        except BaseException as error:
            errors.append(error)

    worker = threading.Thread(target=run, name="worker")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]


def instructions(args: argparse.Namespace) -> None:
    """The run under callgrind: setup and a warm-up pass uncounted, then one pass whose
    pages' serving is counted (`counted`)."""
    with tempfile.TemporaryDirectory() as folder:
        instance, app, client, token, _ = setup(args, folder)
        pages = [0]

        def serve_counted(data: bytes) -> None:
            pages[0] += 1
            callgrind_run.counted(lambda: Client.serve(client, data))

        def passes() -> None:
            read_all(app, client, token, args.format, args.page, args.rows)
            callgrind_run.instrument(True)
            client.serve = serve_counted  # type: ignore[method-assign]
            read_all(app, client, token, args.format, args.page, args.rows)
            callgrind_run.instrument(False)

        try:
            on_worker(passes)
            print(f"pages {pages[0]}")
        finally:
            client.close()
            app.begin_shutdown()
            instance.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--format", choices=("json", "sse"), default="json")
    parser.add_argument("--page", type=int, default=10_000, help="rows a page (limit=)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--txn-rows", type=int, default=100, help="rows per transaction")
    parser.add_argument("--passes", type=int, default=5, help="measured passes over the rows")
    parser.add_argument("--instructions", action="store_true", help="count them (callgrind)")
    parser.add_argument("--keep", help="--instructions: keep callgrind's output in this file")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tree = Path(refimpl.__file__).parent.parent.name
    shape = f"{args.format} limit={args.page}"
    if args.inside:
        instructions(args)
        return
    if args.instructions:
        arguments = ["--inside", "--format", args.format, "--page", str(args.page)]
        arguments += ["--rows", str(args.rows), "--txn-rows", str(args.txn_rows)]
        counted = callgrind_run.total(__file__, arguments, within_reduce=True, keep=args.keep)
        pages = -(-args.rows // args.page)
        print(f"{tree} {shape}: {counted / pages:,.0f} instructions a page ({pages} pages)")
        return
    with tempfile.TemporaryDirectory() as folder:
        instance, app, client, token, lines = setup(args, folder)
        try:
            figures: list[dict[str, float]] = []

            def passes() -> None:
                read_all(app, client, token, args.format, args.page, args.rows)  # warm-up
                for _ in range(args.passes):
                    figures.extend(
                        read_all(app, client, token, args.format, args.page, args.rows, True)
                    )
                    lines.clear()

            on_worker(passes)
        finally:
            client.close()
            app.begin_shutdown()
            instance.close()
    medians = {name: statistics.median(f[name] for f in figures) for name in figures[0]}
    rows_s = args.page / (medians["cpu_ms"] + medians["paused_ms"]) * 1e3
    print(
        f"{tree} {shape}: a page (median of {len(figures)}): {medians['faults']:.0f} minor faults,"
        f" {medians['switches']:.0f} voluntary switches, {medians['pauses']:.0f} pauses"
        f" ({medians['paused_ms']:.2f} ms), {medians['cpu_ms']:.2f} ms CPU"
        f" ({rows_s:,.0f} rows/s of CPU and pauses)"
    )


if __name__ == "__main__":
    main()
