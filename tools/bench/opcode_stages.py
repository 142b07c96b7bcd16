"""A request's Python opcodes by stage: what `exec_in_process.py --opcodes --stages` and
`pg_opcodes.py --stages` print (the budget of issue 37's per-request work); and the count of
one thread's opcodes by function (`opcodes_by_function`) the in-process benches share.

A function's opcodes go to the stage of the file it is written in (`STAGES`, first match),
so that the budget is made from the counts alone and two trees compare stage by stage;
a file no stage names is "other" (mostly the generated `__init__` of dataclasses and named
tuples, whose file is "<string>"), and the bench's own code its own stage.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

# Each stage and the files (module file names, as the counters give them) of its work.
STAGES: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (stage, frozenset(files.split()))
    for stage, files in (
        ("the bench's own code", "exec_in_process.py pg_opcodes.py"),
        ("parse cache and templates", "templates.py parser.py prepared_runs.py"),
        (
            "session, admission, deadline, result",
            "session.py instance.py admission.py deadlines.py cursor_state.py result.py",
        ),
        ("rights", "control.py checks.py"),
        ("row build (prepared INSERT)", "prepared_insert.py triggers.py routines.py"),
        ("transaction overlay", "transaction.py indexes.py"),
        ("commit (record, memory count, timing)", "database.py records.py memory_limit.py"),
        ("commit (measures)", "measures.py"),
        ("table insert (rows, blocks, state lock)", "table.py blocks.py placement.py locks.py"),
        ("revisions and wake-ups", "revisions.py signals.py"),
        ("log append and flush", "wal.py wal_segments.py wal_recent.py files.py options.py"),
        (
            "acknowledgement (park, group commit wait, hand-back)",
            "acknowledgements.py acknowledging.py parked.py room.py flusher.py rounds.py"
            " postbox.py threading.py",
        ),
        ("request log and metrics", "request_log.py log_queue.py log_format.py metrics.py"),
        ("answer encoding", "encode.py portals.py tags.py row_writers.py"),
        (
            "HTTP route and dispatch",
            "sql_routes.py app.py auth.py context.py route_memo.py exec_body.py",
        ),
        (
            "HTTP framing, receive, send",
            "wire.py repeats.py request_input.py connection.py server.py environ.py",
        ),
        (
            "protocol framing, bind, send",
            "run_messages.py core.py link.py conversation.py types.py serving.py sockets.py"
            " notifications.py quick_runs.py states.py clients.py messages.py",
        ),
        ("polling and admission places", "polling.py places.py netlimits.py"),
    )
)
OTHER = "other"


def stage_of(file: str) -> str:
    """The stage of a function written in `file` (a file name, no folder)."""
    return next((stage for stage, files in STAGES if file in files), OTHER)


def by_stage(counts: Iterable[tuple[str, float]]) -> dict[str, float]:
    """(file, opcodes) pairs summed by stage, the largest first."""
    totals: dict[str, float] = {}
    for file, count in counts:
        stage = stage_of(file)
        totals[stage] = totals.get(stage, 0.0) + count
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def print_stages(counts: Iterable[tuple[str, float]], requests: int) -> None:
    """The opcodes a request by stage, as `--stages` prints them."""
    for stage, count in by_stage(counts).items():
        print(f"{count / requests:8.1f}  {stage}")


def opcodes_by_function(run: Callable[[], object]) -> collections.Counter[tuple[str, str]]:
    """The Python opcodes this thread runs in `run()`, by (function, file name): a function
    by its qualified name, a generated one (a dataclass's `__init__`, file "<string>") named
    with its caller's after "<-". Other threads are not traced."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return opcode

    def opcode(frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            code = frame.f_code
            name = code.co_qualname
            if code.co_filename == "<string>" and frame.f_back is not None:
                name += f" <- {frame.f_back.f_code.co_qualname}"
            counts[(name, Path(code.co_filename).name)] += 1
        return opcode

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return counts
