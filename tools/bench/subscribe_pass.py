"""The Python opcodes of one pass of a user's woken live-query streams, by function: what the
owner pool's thread runs around the parts themselves (subscribe_route's `Woken`: making them
one after another, gathering them, waiting once for the flush, sending them by body).

Each of `--streams` woken streams is a stand-in whose `make` does what a real part's making
does to the pass and nothing else: it notes that its answer shows a commit not yet durable
(`live_pass.shown_durable`, on a stand-in database whose log is one commit behind) and gives
a `Headed` part with a head of its own and the body the others share. The room's sender is
a stand-in that walks the parts as the server's does (`taking_turns`, then nothing sent).
So the count is the pass's own work, which the trees compare; the queries' and the sends'
are measured by `subscribe.py` (`--phases 100 --per-symbol 100 --stream --opcodes`). Unlike
CPU time, the count does not depend on the machine's load:

    python tools/bench/subscribe_pass.py
    PYTHONPATH=../before python tools/bench/subscribe_pass.py

`--failed`: the database's log fails at the pass's wait, so each part is made again and
answers the failure (the pass's rare path).
"""

from __future__ import annotations

import sys
from pathlib import Path

# This folder's copy.py and http.py would shadow the standard library's modules: off the path.
# The checkout's refimpl is imported unless PYTHONPATH names another.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent.parent))

import argparse  # noqa: E402
import collections  # noqa: E402
from types import FrameType  # noqa: E402
from typing import Any  # noqa: E402

import refimpl  # noqa: E402
from refimpl.engine.features.live_pass import shown_durable  # noqa: E402
from refimpl.errors import WritesStopped  # noqa: E402
from refimpl.http.endpoints.subscribe_route import Headed, Woken  # noqa: E402
from refimpl.http.error_answers import to_response  # noqa: E402
from refimpl.waiting.room import WaitingRoom  # noqa: E402

BODY = b"event: rows\ndata: {}\n\n"


class _Log:
    """A log one commit behind the state, whose flush ends at the pass's wait (or fails)."""

    def __init__(self, fail: bool) -> None:
        self.durable_lsn = 6
        self._fail = fail

    def wait_durable(self, lsn: int) -> None:
        if self._fail:
            raise WritesStopped("writes stopped: the disk failed")
        self.durable_lsn = lsn


class _Database:
    applied_lsn = 7

    def __init__(self, fail: bool) -> None:
        self.log = _Log(fail)


class _Stream:
    """A woken stream whose part shows the commit not yet durable."""

    def __init__(self, batch: Woken, database: _Database, number: int) -> None:
        self._batch, self._database = batch, database
        self._head = b"id: s%d.2\n" % number

    def make(self) -> Headed | None:
        reads = self._batch.reads
        if self._database in getattr(reads, "failures", ()):  # (a tree before fdc78a0: none)
            return None  # its failure, handed over on its own (not counted here)
        shown_durable(self._database, reads)  # type: ignore[arg-type]  # a stand-in
        return Headed(self, self._head, BODY)


def count(streams: int, fail: bool) -> tuple[collections.Counter[str], int]:
    """Opcodes of one pass of `streams` woken streams, by function; the parts sent."""
    room = WaitingRoom(to_response)
    sent = [0]

    def headed(parts: Any, body: bytes) -> None:
        for _ in parts:
            sent[0] += 1

    room.share_with(lambda *args: None, headed)
    batch = Woken(room, "u")
    database = _Database(fail)
    batch._woken = [_Stream(batch, database, n) for n in range(streams)]
    counts: collections.Counter[str] = collections.Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        key = f"{Path(code.co_filename).name}:{code.co_qualname}"

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    sys.settrace(trace)
    try:
        batch._run_all()
    finally:
        sys.settrace(None)
        room.close()
    return counts, sent[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=100, help="woken streams in the pass")
    parser.add_argument("--top", type=int, default=15, help="functions listed")
    parser.add_argument("--failed", action="store_true", help="the log fails at the wait")
    args = parser.parse_args()
    counts, sent = count(args.streams, args.failed)
    own = sum(n for key, n in counts.items() if key.startswith("subscribe_pass.py:"))
    print(
        f"refimpl of {Path(refimpl.__file__).resolve().parent.parent.name}: one pass of"
        f" {args.streams} woken streams, {sent} parts sent: {sum(counts.values())} Python"
        f" opcodes ({sum(counts.values()) - own} but the stand-ins' own)"
    )
    for key, found in counts.most_common(args.top):
        print(f"{found:9d}  {key}")


if __name__ == "__main__":
    main()
