"""The Python opcodes per commit of an event stream's take, by function: what the server runs
once per commit for all the streams of a database that stand at one place with one view.

A fan-out round of `tools/bench/stream.py` (see its `--server-timing`) sends the streams of a
group one part for all of them: the group takes once (`EventCursor.take`: the log read,
each transaction's events made and encoded once, `stream_transactions.transaction_events`),
the part's bytes are made once, and each stream costs one send. While commits come faster
than rounds, a round carries hundreds of commits: per commit, the sends are the kernel's
copying of the events' bytes to every socket, and the take is the one Python part that grows
with the commits. This commits `--commits` one-row INSERTs into a table of the stream
bench's shape on an engine in a throwaway folder, then counts every opcode of one take of
all of them by a current cursor. Unlike CPU time, the count does not depend on the
machine's load, so two trees compare on a busy machine too:

    python tools/bench/stream_take.py
    PYTHONPATH=../before python tools/bench/stream_take.py

With `--budget` (bytes: 262144 is a stream's part at `stream_buffer_kb` 256), the take stops
at the budget, as a group's take in a round does while writers commit faster than rounds
send: the group then stands thousands of commits behind the end, and the opcodes are counted
per commit it took (what it did not take costs it nothing now, or it costs it twice):

    python tools/bench/stream_take.py --commits 3000 --budget 262144

With `--user`, the stream is a user's with SELECT on the table, its rights looked at as the
server looks at them (`event_streams._shows`), not one that follows every table.
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
import functools  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from types import FrameType  # noqa: E402
from typing import Any  # noqa: E402

import refimpl  # noqa: E402
from refimpl.engine.event_streams import _shows  # noqa: E402
from refimpl.engine.features.event_cursor import EventCursor  # noqa: E402
from refimpl.engine.rights import Principal  # noqa: E402

try:  # its own module since 01ce048; a tree before it (PYTHONPATH) has it in event_cursor
    from refimpl.engine.features.recent_transactions import RecentTransactions
except ImportError:
    from refimpl.engine.features.event_cursor import RecentTransactions  # type: ignore[attr-defined,no-redef]


def count(commits: int, budget: int, user: bool) -> tuple[collections.Counter[str], int]:
    """Opcodes by function of one take (of `budget` bytes at most) after `commits` one-row
    commits; the events taken. `user`: the stream's rights are a user's with SELECT on the
    table (the server's own look at them), else it follows every table."""
    with tempfile.TemporaryDirectory() as folder:
        connection = refimpl.connect(folder)
        connection.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        database = connection.instance.database(connection.database)
        recent = RecentTransactions(database, database.name)
        follows: Callable[[str], bool] = lambda table: True  # noqa: E731
        if user:
            connection.execute("CREATE USER u")
            connection.execute("GRANT SELECT ON c TO u")
            access = connection.instance.access
            follows = functools.partial(_shows, access, database.name, None, Principal("u"))
        # As a group's cursor: current (its `ready` taken), with a view, following `c`, and
        # reading the rights' version at each transaction as the server's do (a tree whose
        # cursors have one).
        more: dict[str, Any] = {}
        if "rights_version" in getattr(EventCursor, "__dataclass_fields__", {}):
            access = connection.instance.access
            more["rights_version"] = functools.partial(getattr, access, "version")
        cursor = EventCursor(recent, follows, 300.0, time.time, None, lambda: None, **more)
        cursor.take(1 << 18)
        for n in range(commits):
            connection.execute(f"INSERT INTO c VALUES ({10_000_000 + n}, {time.monotonic()!r})")
        counts: collections.Counter[str] = collections.Counter()

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            code = frame.f_code
            key = f"{Path(code.co_filename).name}:{code.co_qualname}"
            if code.co_name == "__init__" and "self" in frame.f_locals:  # a dataclass's
                key += f" ({type(frame.f_locals['self']).__name__})"

            def local(frame: FrameType, event: str, arg: Any) -> Any:
                if event == "opcode":
                    counts[key] += 1
                return local

            return local

        sys.settrace(trace)
        try:
            taken = cursor.take(budget)
        finally:
            sys.settrace(None)
        connection.close()
    return counts, len(taken.events)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--top", type=int, default=25, help="functions listed")
    parser.add_argument(
        "--budget", type=int, default=1 << 40, help="bytes the take stops at (all by default)"
    )
    parser.add_argument(
        "--user", action="store_true", help="a user's stream (SELECT on the table), not admin's"
    )
    args = parser.parse_args()
    counts, events = count(args.commits, args.budget, args.user)
    if events != args.commits and args.budget == 1 << 40:
        raise SystemExit(f"took {events} events of {args.commits} commits")
    print(
        f"refimpl of {Path(refimpl.__file__).resolve().parent.parent.name}: one take of"
        f" {events} of {args.commits} one-row commits, {sum(counts.values()) / events:.0f}"
        " Python opcodes a commit taken"
    )
    for key, found in counts.most_common(args.top):
        print(f"{found / events:9.1f}  {key}")


if __name__ == "__main__":
    main()
