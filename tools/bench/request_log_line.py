"""What the log thread spends on one request's text line, by kind of request, whatever the
load: `RequestLine.text_line` with the text format (what the server's log writer calls for a
stream handler), timed and counted by callgrind.

The kinds: a `POST /exec` (no query string: its SQL is the body), a
`GET /api/rev?table=...&symbol=...`, and `subscribe.py`'s long poll
`GET /api/subscribe?query=<candle SQL>&id=<sub>.<n>&wait=...` asked again and again with the
next id (the line of a woken long poll; after the first, the lines of its shape), plus the
first line of a new long poll (a new subscription: no shape kept yet) and a query with a
token in it (the redaction's path).

    python tools/bench/request_log_line.py                    # us a line, best of --repeat
    python tools/bench/request_log_line.py --instructions     # callgrind: instructions a line
    PYTHONPATH=<other tree> python tools/bench/request_log_line.py --instructions

The instructions are those within `callgrind_run.counted` only: the same run after run.
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import refimpl
from refimpl.http.request_log import LineShapes, RequestLine
from refimpl.log_format import TextLineFormatter

callgrind_run = sibling("callgrind_run")
candle_query = sibling("candle_query")

CANDLE = quote(candle_query.CANDLES.format(symbol="S0042"))
WAIT = "&wait=30000"
SUBSCRIPTION = "a81f3c09e2d44b7c"


def line(method: str, path: str, query: str, shapes: LineShapes | None, n: int) -> RequestLine:
    return RequestLine(
        time.time(), method, path, query, path, 200, 0.000_4 + n * 1e-7, f"{n:016x}", "::1", shapes
    )


def kinds() -> dict[str, Callable[[int], RequestLine]]:
    """Each kind's n-th line (n counts from 0; a long poll's id grows with it)."""
    shapes = LineShapes()  # one writer's, as a server's RequestLog keeps it
    token = "kdb_" + "Zq3" * 10
    return {
        "POST /exec": lambda n: line("POST", "/exec", "", shapes, n),
        "GET /api/rev": lambda n: line("GET", "/api/rev", "table=trades&symbol=S0042", shapes, n),
        "long poll (shaped)": lambda n: line(
            "GET", "/api/subscribe", f"query={CANDLE}&id={SUBSCRIPTION}.{n + 1}{WAIT}", shapes, n
        ),
        "long poll (first)": lambda n: line(
            "GET", "/api/subscribe", f"query={CANDLE}&id={n:x}.1{WAIT}", None, n
        ),
        "query with a token": lambda n: line(
            "GET", "/api/changes", f"token={token}&format=json&wait={n}", shapes, n
        ),
    }


def made(kind: Callable[[int], RequestLine], count: int) -> list[RequestLine]:
    return [kind(n) for n in range(count)]


def write_all(lines: list[RequestLine], formatter: TextLineFormatter) -> None:
    for one in lines:
        one.text_line(formatter)


def timed(args: argparse.Namespace) -> None:
    formatter = TextLineFormatter()
    for name, kind in kinds().items():
        write_all(made(kind, 10), formatter)  # warm: a shape kept, caches filled
        best = min(
            timeit.repeat(
                "write_all(lines, formatter)",
                setup="lines = made(kind, count)",
                globals={
                    "write_all": write_all,
                    "made": made,
                    "kind": kind,
                    "count": args.lines,
                    "formatter": formatter,
                },
                number=1,
                repeat=args.repeat,
            )
        )
        print(f"{name:20} {best / args.lines * 1e6:6.2f} us a line")


def inside(args: argparse.Namespace) -> None:
    """The run under callgrind: the lines of `--kind` made uncounted, their text counted."""
    formatter = TextLineFormatter()
    kind = kinds()[args.kind]
    write_all(made(kind, 10), formatter)
    lines = made(kind, args.lines)
    callgrind_run.instrument(True, spin=True)
    callgrind_run.counted(lambda: write_all(lines, formatter))
    callgrind_run.instrument(False, spin=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=2_000, help="lines a run")
    parser.add_argument("--repeat", type=int, default=9, help="timed runs (the best shown)")
    parser.add_argument("--instructions", action="store_true", help="count under callgrind")
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kind:
        inside(args)
        return
    tree = Path(refimpl.__file__).parent.parent.name
    print(f"tree {tree}")
    if not args.instructions:
        timed(args)
        return
    for name in kinds():
        arguments = ["--kind", name, "--lines", str(args.lines)]
        count = callgrind_run.total(__file__, arguments, within_reduce=True)
        print(f"{name:20} {count / args.lines:8,.0f} instructions a line")


if __name__ == "__main__":
    main()
