"""The cost of one commit's parts to `--streams` live-query streams of one query, in this
process: the real streams of `GET /api/subscribe?stream=true` (subscribe_stream's
`_LiveStream`, each its own subscription of `subscribe.py`'s candle query of one symbol, the
admin's with a bearer token, as that bench's), woken by a one-row commit to their symbol; the
pass of their user's batch (`Woken`) that makes the parts, waits once for the flush and hands
them to the deliverer, whose sends are a stand-in that tells each stream its part went out
whole (the server's `_send_headed` does that after its sends). So the count is the owner
pool's work a commit without the kernel's sends (those `subscribe.py --phases 100
--per-symbol 100 --stream` measures): the first stream's re-run, the others' taking its
step, each stream's part, the pass around them. With `--sockets` the deliverer is the
server's own `_send_headed`, each stream's connection a loopback socket that this process
reads between the passes (uncounted): the sends' Python and C too, the kernel's work not
(callgrind sees none of it). The commit's own thread (the INSERT and the streams'
wake-ups) is counted apart. Opcodes by function, or with `--instructions` machine
instructions (valgrind's callgrind, C included), neither moved by the machine's load:

    python tools/bench/subscribe_parts.py
    PYTHONPATH=../before python tools/bench/subscribe_parts.py
    python tools/bench/subscribe_parts.py --instructions
    python tools/bench/subscribe_parts.py --instructions --sockets
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import collections
import contextlib
import select
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import refimpl
from refimpl.engine.event_streams import Credential
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.auth import CREDENTIALS_KEY, ConnectionCredentials
from refimpl.http.endpoints import subscribe_stream
from refimpl.http.endpoints.subscribe_route import woken
from refimpl.http.error_answers import to_response
from refimpl.http.serving import wire
from refimpl.http.serving.connection import Connection
from refimpl.http.serving.server import PooledWSGIServer
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import WaitingRoom

opcode_stages = sibling("opcode_stages")
callgrind_run = sibling("callgrind_run")
ADMIN = Principal("admin", is_admin=True)
candle_query = sibling("candle_query")
TRADES = candle_query.TRADES
CANDLES = candle_query.CANDLES.format(symbol="S0000")


class _Pool:
    """The room's owner pool, but its jobs run when the bench says (`run`), on its thread."""

    def __init__(self) -> None:
        self.batches: dict[Any, Any] = {}
        self.jobs: list[Callable[[], None]] = []

    def submit(self, owner: object, job: Callable[[], None]) -> None:
        self.jobs.append(job)

    def run(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            job()

    def close(self) -> None:
        pass


class _Outlet:
    """A stream's connection as the server's sends see it."""

    def __init__(self) -> None:
        self.parked: Parked[Any] | None = None
        self.sent = 0


def _send_headed(parts: Any, body: bytes) -> None:
    """The server's `_send_headed` without its system calls: each part counted as sent
    whole, its stream told so once all are."""
    drained = []
    for outlet, head in parts:
        outlet.sent += len(head) + len(body)
        drained.append(outlet.parked.drained)
    for each in drained:
        each()


class _Sockets:
    """The server's own `_send_headed` (`--sockets`), on a server of only what it uses, to
    connections over loopback sockets whose other ends this process reads (`read`)."""

    def __init__(self) -> None:
        self.server = server = object.__new__(PooledWSGIServer)
        server._lock = threading.Lock()
        server._epoll = select.epoll()
        server._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._host = SimpleNamespace(
            server_address=self._listener.getsockname(),
            max_body_bytes=wire.DEFAULT_MAX_BODY_BYTES,
            app=None,
        )
        self._readers: list[socket.socket] = []
        self.received = 0

    def connection(self) -> Connection:
        """A connection whose client is a socket of this process."""
        reader = socket.create_connection(self._listener.getsockname())
        reader.setblocking(False)
        sock, address = self._listener.accept()
        handler = Connection(sock, address, self._host)
        self.server._epoll.register(sock.fileno(), 0)
        self._readers.append(reader)
        return handler

    def read(self) -> None:
        """Take what the connections sent (on loopback it is there once sent)."""
        for reader in self._readers:
            while True:
                try:
                    data = reader.recv(1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    break
                self.received += len(data)

    def close(self) -> None:
        for reader in self._readers:
            reader.close()
        self._listener.close()
        self.server._epoll.close()


class Bench:
    """An engine in `folder` with `streams` streams of the candle query, their pass run by
    the bench (`commit`, then `pass_`); `sockets`: sent by the server's `_send_headed`."""

    def __init__(self, folder: Path, streams: int, sockets: bool = False) -> None:
        self.instance = instance = Instance.open(folder)
        token = instance.access.ensure_admin()
        assert token is not None
        self.writer = instance.session("demo", ADMIN)
        self.writer.execute(TRADES)
        self.n = 0
        for _ in range(20):
            self.commit()
        self.room = room = WaitingRoom(to_response)
        self.pool = _Pool()
        room.owner_work.close()
        room.owner_work = self.pool  # type: ignore[assignment]  # a stand-in
        self.sockets = _Sockets() if sockets else None
        room.share_with(
            lambda *args: None,
            _send_headed if self.sockets is None else self.sockets.server._send_headed,
        )
        kept = ConnectionCredentials()
        kept.header = f"Bearer {token}"
        kept.checked = instance.access.check_token(token)
        ctx = SimpleNamespace(
            request=SimpleNamespace(
                environ={CREDENTIALS_KEY: kept, "HTTP_AUTHORIZATION": kept.header}
            )
        )
        credential = Credential(instance.access.token_key(token), ADMIN)
        self.outlets = []
        for _ in range(streams):
            session = instance.session("demo", ADMIN)
            stream = subscribe_stream._LiveStream(
                instance.subscriptions,
                session,
                CANDLES,
                False,
                subscribe_stream._TokenLook(instance.access, credential, ctx),  # type: ignore[arg-type]
                3600.0,
                3600.0,
                _no_budget,
            )
            reply = instance.subscriptions.ask_now(session, CANDLES, None)
            stream.first(reply)
            parked: Parked[Any] = Parked(
                None,
                0,
                lambda _: None,
                stream.heartbeat,
                time.monotonic() + 3600,
                lambda: None,
                kind=Kind.LIVE_STREAM,
                at_close=stream.closing,
                on_drained=stream.drained,
            )
            outlet: _Outlet | Connection
            if self.sockets is None:
                outlet = _Outlet()
                outlet.parked = parked
                self.outlets.append(outlet)
            else:
                outlet = self.sockets.connection()
                outlet.stream = parked
            parked.on_ready(lambda answer: None, lambda part: None, outlet)
            parked.decide(Part(b"its head"))
            stream.start(parked, woken(room, "admin"), True)
            parked.drained()  # its head went out

    def commit(self) -> None:
        """A trade of the streams' symbol: wakes every stream."""
        self.n += 1
        self.writer.execute(
            f"INSERT INTO trades VALUES ({1_700_000_000_000_000 + self.n * 1_000},"
            f" 'S0000', {self.n}.5)"
        )

    def pass_(self) -> None:
        """The woken streams' pass: their parts made and sent."""
        self.pool.run()

    def read(self) -> None:
        """The streams' clients take what was sent (`--sockets`; uncounted)."""
        if self.sockets is not None:
            self.sockets.read()

    def sent(self) -> int:
        if self.sockets is not None:
            return self.sockets.received
        return sum(outlet.sent for outlet in self.outlets)

    def close(self) -> None:
        if self.sockets is not None:
            self.sockets.close()
        self.room.close()
        self.writer.close()
        self.instance.close()


def _no_budget() -> contextlib.AbstractContextManager[object]:
    """A part's statement budget: none (no run here reaches a timeout)."""
    return contextlib.nullcontext()


def passes(bench: Bench, commits: int) -> None:
    for _ in range(commits):
        bench.commit()
        bench.pass_()
        bench.read()


def instructions(args: argparse.Namespace) -> None:
    """Run this script under callgrind; print its count of the passes' instructions a
    commit (the commits themselves uncounted)."""
    arguments = ["--streams", str(args.streams), "--commits", str(args.commits), "--once"]
    if args.sockets:
        arguments.append("--sockets")
    per = callgrind_run.total(__file__, arguments, within_reduce=True) / args.commits
    tree = Path(refimpl.__file__).parent.parent.name
    sends = ", the server's sends" if args.sockets else ""
    print(
        f"{tree}: {per:,.0f} instructions a commit's pass of {args.streams} streams{sends}"
        f" ({per / args.streams:,.0f} a stream)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--commits", type=int, default=20, help="commits counted")
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    parser.add_argument(
        "--sockets", action="store_true", help="the server's own sends, to loopback sockets"
    )
    callgrind_run.add_arguments(parser)
    args = parser.parse_args()
    if args.instructions:
        instructions(args)
        return
    with tempfile.TemporaryDirectory() as folder:
        bench = Bench(Path(folder), args.streams, args.sockets)
        try:
            passes(bench, 10)  # warm: every subscription keeps its most versions
            before = bench.sent()
            if args.once:
                callgrind_run.instrument(spin=True)  # no other thread runs
                passes_only(bench, args.commits)
                return
            commit_counts: collections.Counter[tuple[str, str]] = collections.Counter()
            pass_counts: collections.Counter[tuple[str, str]] = collections.Counter()
            for _ in range(args.commits):
                commit_counts += opcode_stages.opcodes_by_function(bench.commit)
                pass_counts += opcode_stages.opcodes_by_function(bench.pass_)
                bench.read()
            sent = bench.sent() - before
        finally:
            bench.close()
    per = args.commits
    tree = Path(refimpl.__file__).parent.parent.name
    total = sum(pass_counts.values()) / per
    print(
        f"{tree}: a commit waking {args.streams} streams, {sent / per:,.0f} bytes sent:"
        f" the pass {total:,.0f} Python opcodes ({total / args.streams:,.1f} a stream),"
        f" the commit's thread {sum(commit_counts.values()) / per:,.0f}"
    )
    for (name, file), found in pass_counts.most_common(args.top):
        print(f"{found / per:9.1f}  {name} ({file})")


def passes_only(bench: Bench, commits: int) -> None:
    """`commits` commits, each then its pass; only the passes counted by callgrind
    (`callgrind_run.counted`: nothing of the pass calls `functools.reduce`)."""
    for _ in range(commits):
        bench.commit()
        callgrind_run.counted(bench.pass_)
        bench.read()


if __name__ == "__main__":
    main()
