"""One fan-out round of `--streams` real event streams (`GET /stream/changes`) in this process:
what the waiting room's thread runs a stream to send them a commit's events.

A `PooledWSGIServer` with the app serves the streams over loopback sockets that this process
holds (bearer token, `table=c`, as `stream.py`'s readers ask); once each has its `ready`, a
session commits `--rows` rows into `c` in one INSERT, which pokes the streams; the room's
thread runs their round (the group's take, the part made once, `_send_shared`'s send to each
socket), and the bench reads every socket between rounds, uncounted, checking that each
stream got each round's events once. Only the round is counted, on its own thread: its
Python opcodes by function, or with `--instructions` its machine instructions (valgrind's
callgrind, C included; the kernel's copy of the bytes into each socket is not seen), per
stream: what a stream costs a round beside the send itself (`stream_sends.py` measures the
send's floor). Neither figure moves with the machine's load, so two trees compare on a busy
machine too:

    python tools/bench/stream_round.py
    PYTHONPATH=../before python tools/bench/stream_round.py
    python tools/bench/stream_round.py --instructions --streams 200
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import collections
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import refimpl
from refimpl.engine.event_streams import StreamOptions
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.app import App, AppOptions
from refimpl.http.serving.limits import raise_open_file_limit
from refimpl.http.serving.server import PooledWSGIServer
from refimpl.waiting.room import WaitingRoom

callgrind_run = sibling("callgrind_run")
ADMIN = Principal("admin", is_admin=True)
WAIT_SECONDS = 60.0  # a round, or a stream's events, not there by then: the bench fails


class Rounds:
    """`WaitingRoom._fanout_round` wrapped: the rounds of all `streams` streams are counted
    (opcodes by function, or within `callgrind_run.counted`) while `counting` is set."""

    def __init__(self, streams: int, instructions: bool, cpu: bool) -> None:
        self.streams = streams
        self.instructions = instructions
        self.cpu = cpu  # the rounds' thread CPU time noted instead of a count
        self.cpu_times: list[float] = []  # of the rounds counted, with `cpu`
        self.counting = False
        self.counted = 0  # rounds counted
        self.opcodes: collections.Counter[str] = collections.Counter()
        self.done = threading.Condition()
        self._original = WaitingRoom._fanout_round

    def install(self) -> None:
        original = self._original

        def fanout_round(room: Any, requests: list[Any], finished: list[Any]) -> None:
            counting = self.counting and len(requests) == self.streams
            if not counting or self.cpu:
                cpu = time.thread_time()
                original(room, requests, finished)
                if counting:
                    self.cpu_times.append(time.thread_time() - cpu)
            elif self.instructions:
                callgrind_run.counted(lambda: original(room, requests, finished))
            else:
                sys.settrace(self._trace)
                try:
                    original(room, requests, finished)
                finally:
                    sys.settrace(None)
            if counting:
                with self.done:
                    self.counted += 1
                    self.done.notify_all()

        WaitingRoom._fanout_round = fanout_round  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        WaitingRoom._fanout_round = self._original  # type: ignore[method-assign]

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        key = f"{Path(code.co_filename).name}:{code.co_qualname}"
        counts = self.opcodes

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    def wait_for(self, rounds: int) -> None:
        with self.done:
            if not self.done.wait_for(lambda: self.counted >= rounds, WAIT_SECONDS):
                raise SystemExit(f"round {rounds} of all the streams did not come")


def changes_in(data: bytes) -> tuple[int, bytes]:
    """The change events of `data` (a stream's bytes, chunked) whose block came whole, and
    the rest: a block cut between reads is counted when its rest comes."""
    cut = data.rfind(b"\n\n") + 2
    return data.count(b"event: change", 0, cut), data[cut:]


class Readers:
    """The streams' client ends: each opened with a bearer token, read whole between rounds,
    its change events counted."""

    def __init__(self, port: int, token: str, count: int) -> None:
        request = (
            f"GET /stream/changes?table=c HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
        self.selector = selectors.DefaultSelector()
        self.changes = [0] * count
        self.tails = [b""] * count  # a block split between reads
        for n in range(count):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(request)
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ, n)
        self.read_until(lambda n: b"event: ready" in self.tails[n], keep=True)

    def read_until(self, done: Callable[[int], bool], keep: bool = False) -> None:
        """Read every socket until `done(stream)` holds for each; `keep`: all bytes kept."""
        waiting = set(range(len(self.changes)))
        ends = time.monotonic() + WAIT_SECONDS
        while waiting:
            if time.monotonic() > ends:
                raise SystemExit(f"{len(waiting)} streams did not get their events")
            for key, _ in self.selector.select(1.0):
                n = key.data
                data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
                if not data:
                    raise SystemExit(f"stream {n} ended")
                data = self.tails[n] + data
                if not keep:
                    found, data = changes_in(data)
                    self.changes[n] += found
                self.tails[n] = data
                if done(n):
                    waiting.discard(n)
        if keep:
            self.tails = [b""] * len(self.changes)

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()


def run(args: argparse.Namespace) -> Rounds:
    """Opens the streams, then `args.rounds` rounds uncounted (warm-up) and as many counted."""
    raise_open_file_limit()
    rounds = Rounds(args.streams, args.instructions, args.cpu)
    rounds.install()
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        token = instance.access.ensure_admin()
        assert token is not None
        writer = instance.session("demo", ADMIN)
        writer.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        many = max(args.streams, 1000)
        options = StreamOptions(per_token=many, per_user=many, capacity=many)
        app = App(instance, AppOptions(threads=4, streams=options))
        server = PooledWSGIServer("127.0.0.1", 0, app, 4)
        threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
        readers = Readers(server.server_address[1], token, args.streams)
        try:
            next_id = 0
            for phase in ("warm-up", "counted"):
                for _ in range(args.rounds):
                    if phase == "counted":
                        rounds.counting = True
                        if args.instructions and rounds.counted == 0:
                            callgrind_run.instrument()
                    values = ", ".join(
                        f"({next_id + i}, {time.monotonic()!r})" for i in range(args.rows)
                    )
                    next_id += args.rows
                    writer.execute(f"INSERT INTO c VALUES {values}")
                    if phase == "counted":
                        rounds.wait_for(rounds.counted + 1)
                    readers.read_until(lambda n, got=next_id: readers.changes[n] >= got)
            wrong = [n for n, got in enumerate(readers.changes) if got != next_id]
            if wrong:
                raise SystemExit(f"{len(wrong)} streams got other than {next_id} events")
        finally:
            rounds.uninstall()
            readers.close()
            server.shutdown()
            app.begin_shutdown()
            server.drain()
            server.server_close()
            writer.close()
            instance.close()
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1, help="rows (events) a round carries")
    parser.add_argument("--rounds", type=int, default=5, help="rounds counted (and warm-up)")
    parser.add_argument("--top", type=int, default=20, help="functions listed")
    parser.add_argument(
        "--cpu", action="store_true", help="the round's thread CPU time, not opcodes (untraced)"
    )
    parser.add_argument("--keep", help="with --instructions: callgrind's output file, kept")
    callgrind_run.add_arguments(parser)
    args = parser.parse_args()
    tree = Path(refimpl.__file__).resolve().parent.parent.name
    shape = f"{args.streams} streams, rounds of {args.rows} events"
    if args.instructions and not args.once:
        arguments = [*sys.argv[1:], "--once"]
        total = callgrind_run.total(__file__, arguments, within_reduce=True, keep=args.keep)
        per = total / args.rounds / args.streams
        print(f"refimpl of {tree}: {shape}: {per:,.0f} instructions a stream a round")
        return
    rounds = run(args)
    if args.instructions:
        return  # the count is the outer run's
    if args.cpu:
        per = statistics.median(rounds.cpu_times) / args.streams * 1e6
        print(f"refimpl of {tree}: {shape}: {per:.2f} us of CPU a stream a round (median)")
        return
    per_stream = sum(rounds.opcodes.values()) / args.rounds / args.streams
    print(f"refimpl of {tree}: {shape}: {per_stream:.1f} Python opcodes a stream a round")
    for key, found in rounds.opcodes.most_common(args.top):
        print(f"{found / args.rounds / args.streams:9.2f}  {key}")


if __name__ == "__main__":
    main()
