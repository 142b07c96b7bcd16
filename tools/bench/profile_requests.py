"""Where a request's CPU goes: py-spy samples the server while one workload runs.

Each workload is a phase of `pgwire.py` (prepared point SELECT, one-row INSERT, 16 psycopg
clients) or of `http.py` (/exec point SELECT, one-row INSERT, 16 lean HTTP clients), or one
reader of `/api/changes?format=json&limit=100` over 200 commits of 100 rows, against a
`refimpl serve` process. `py-spy record --gil` samples that process (the thread holding
the interpreter lock at each sample: the Python CPU a request costs, not the threads
waiting for the lock) for the phase's seconds and writes collapsed stacks (`<name>.txt`,
one line a stack and its sample count, the form flame graph tools such as inferno or
flamegraph.pl draw) into --out. The folder prefixes of the file names in the stacks are
cut to the path inside the repository or the installed package, so the output names no
machine's folders. `--workloads` picks some; `--code` samples the server of another
checkout (the tree before a change, say).

    python tools/bench/profile_requests.py --out tools/bench/profiles
    python tools/bench/profile_requests.py --workloads pg-select,exec-insert --seconds 5
    python tools/bench/profile_requests.py --budget tools/bench/profiles/pg-select.txt

`--budget` prints the share of each stage in collapsed stacks instead (a sample goes to
the stage of its innermost frame that `STAGES` names; the rest is the server loop).

Needs py-spy (`pip install py-spy`) and the right to trace the server (root, or
ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

import harness
import msgspec
import pgwire

bench_http = harness.bench_http()  # this folder's http.py

WORKLOADS = {
    "pg-select": ("pgwire", "select"),
    "pg-insert": ("pgwire", "insert"),
    "exec-select": ("http", "select"),
    "exec-insert": ("http", "insert"),
    "changes-json-100": ("http", "changes"),
}
CHANGES_PAGE = 100

# A frame's file as py-spy writes it: "function (path/to/file.py:line)".
_FOLDER = re.compile(r"\((?:[^();]*/)?(refimpl/|site-packages/|lib/python3[.\d]*/)")
_LINE = re.compile(r":\d+\)")


def clean(collapsed: str) -> str:
    """The stacks with every folder before `refimpl/`, a package or the standard library
    cut away, and the line numbers too (stacks then equal are merged: one line a function
    path, which keeps the files small)."""
    counts: dict[str, int] = {}
    for line in collapsed.splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack:
            continue
        stack = _LINE.sub(")", _FOLDER.sub(lambda match: "(" + match.group(1), stack))
        counts[stack] = counts.get(stack, 0) + int(samples)
    return "".join(f"{stack} {samples}\n" for stack, samples in counts.items())


# The stages of a request over the PostgreSQL protocol and over HTTP, by the frames that
# name them (a function's name as py-spy writes it, before the file); the first stage whose
# name a sample's innermost such frame starts with is the sample's.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("counting for /metrics", ("PgCounts.", "PgServer._count", "ProtocolCore.take_counts")),
    # A one-row INSERT commits by `commit_new_row` (the row installed, its log record
    # appended, the revisions and the recent records): the commit's Python, no wait.
    ("commit", ("Database.commit_locked", "Database.commit_new_row", "Database._make_visible")),
    ("commit", ("Session.insert_new_row", "WriteAheadLog.append", "Table.put", "Blocks.__set")),
    ("commit", ("RecentRecords.", "Revisions.advance")),
    # The leader of a group commit: the gather, the write and fsync, the zeros ahead.
    (
        "log flush (the group commit's leader)",
        ("Gather.", "WriteAheadLog._write_batch", "WriteAheadLog._timed", "ZeroAhead."),
    ),
    ("log flush (the group commit's leader)", ("WriteAheadLog.wait_durable",)),
    ("row read", ("Table.get", "read_without_lock", "Blocks.__getitem__")),
    (
        "commit wait and acknowledgement",
        ("Acknowledging._round", "Session.wait_durable", "PgServer._acknowledge", "Rounds."),
    ),
    (
        "commit wait and acknowledgement",
        ("Flusher.", "WaitingRoom._on_commit", "acknowledge_when_durable", "Context.when_durable"),
    ),
    ("plan lookup and rights", ("point_plan", "PlanCache.", "PreparedTableSelect._points")),
    ("plan lookup and rights", ("Session.authorize", "AccessControl.")),
    ("token and request guards", ("Authenticator.", "ConnectionCredentials.", "RequestGuards.")),
    ("admission and deadline", ("before_statements", "running.__", "watch_cancel")),
    ("admission and deadline", ("request_started",)),
    (
        "netpool: polling workers, admission places",
        ("PollingWorkers.", "FifoSlots.", "admitted (", "holding (", "done (", "waiting ("),
    ),
    ("bind", ("Conversation.bind", "ParamDecoders.")),
    ("parse", ("parse_cached", "Conversation._plan", "Conversation.parse")),
    ("parse", ("template_of", "shared_parse", "ParsedHandlers.")),
    ("execute", ("Session.run_prepared", "Session.execute", "Conversation._run")),
    ("execute", ("execute ", "select_rows", "table_rows", "_insert", "PreparedTableSelect")),
    ("execute", ("PreparedInsert.", "Conversation.run_known", "Conversation._run_prepared")),
    ("framing and decode", ("ProtocolCore.next_", "ProtocolCore.has_message", "read_run")),
    ("framing and decode", ("read (<pgwire run reader>", "Inbox.", "BodyRepeat.")),
    ("framing and decode", ("ProtocolCore.receive_data", "ProtocolCore._next_frame")),
    ("framing and decode", ("RequestReader.", "BodyReader.", "make_environ", "Request.")),
    ("framing and decode", ("Connection.request_ready", "answer_head")),
    ("encode", ("ProtocolCore.send", "DataRows.encode", "Prepared.row_shape")),
    ("encode", ("result_body", "json_response", "convert_rows")),
    # The answer's bytes: a protocol run's rows (compiled writer) and tag, /exec's JSON.
    ("encode", ("write (<pgwire rows writer>", "QuickRun.tag", "message_result")),
    ("encode", ("result_answer", "named_answer_bytes", "Answer.")),
    ("request log", ("RequestLog.", "RequestRecord.", "RequestLine.", "RequestIds.")),
    ("request log", ("_Writer.", "Formatter.", "Handler.", "TextLineFormatter.")),
    ("send", ("_Client.send_some", "Socket.send", "_Client.goodbye", "Connection._send")),
    ("HTTP route and dispatch", ("exec_route", "_sql_of", "App.", "Context.")),
    # Last: a frame of the servers' own loops names it only when no stage above does.
    ("server loop, locks, dispatch", ("PgServer.", "PooledWSGIServer.", "Connection.", "Link.")),
)
LOOP = "server loop, locks, dispatch"


def budget(collapsed: str) -> dict[str, float]:
    """Each stage's share (0 to 1) of the samples of collapsed stacks, by `STAGES`."""
    counts: dict[str, int] = {}
    for line in collapsed.splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack:
            continue
        stage = LOOP
        for frame in reversed(stack.split(";")):
            found = next((s for s, names in STAGES if frame.startswith(names)), None)
            if found is not None:
                stage = found
                break
        counts[stage] = counts.get(stage, 0) + int(samples)
    total = sum(counts.values()) or 1
    return {stage: count / total for stage, count in counts.items()}


def _spy(pid: int, seconds: float, raw: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling process `pid` for `seconds` into `raw` (collapsed stacks)."""
    command = ["py-spy", "record", "--pid", str(pid), "--duration", str(int(seconds) + 1)]
    command += ["--rate", "250", "--gil", "--format", "raw", "--output", str(raw)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _read_changes(lean: harness.LeanHTTP, seconds: float) -> int:
    """Pages of 100 changes read one after the other for `seconds` (from the start again
    at the end); how many."""
    stop, after, pages = time.monotonic() + seconds, 0, 0
    while time.monotonic() < stop:
        target = f"/api/changes?table=t&format=json&limit={CHANGES_PAGE}&from={after}"
        status, _, body = lean.request("GET", target)
        assert status == 200, body
        answer = msgspec.json.decode(body)
        after = answer["next"] if answer["changes"] else 0
        pages += 1
    return pages


def profile_changes(seconds: float, out: Path, code: Path | None = None) -> dict[str, float]:
    """One reader of /api/changes at pages of 100 rows, over 200 commits of 100 rows."""
    server = harness.RefimplServer(threads=16, code=code)
    with server, tempfile.TemporaryDirectory() as folder:
        server.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
        for first in range(0, 20_000, CHANGES_PAGE):
            values = (f"({i}, {i * 0.25}, 'row {i}')" for i in range(first, first + CHANGES_PAGE))
            server.sql("INSERT INTO t VALUES " + ", ".join(values))
        lean = harness.LeanHTTP(server.url, server.headers)
        _read_changes(lean, 1.0)
        raw = Path(folder) / "stacks.txt"
        spy = _spy(server.pid, seconds, raw)
        cpu, began = harness.cpu_seconds(server.pid), time.monotonic()
        pages = _read_changes(lean, seconds)
        cpu, elapsed = harness.cpu_seconds(server.pid) - cpu, time.monotonic() - began
        spy.wait()
        (out / "changes-json-100.txt").write_text(clean(raw.read_text()))
    return {"rate": pages / elapsed, "cpu_ms": 1000 * cpu / pages}


def profile(
    name: str, seconds: float, procs: int, out: Path, code: Path | None = None
) -> dict[str, float]:
    if name == "changes-json-100":
        return profile_changes(seconds, out, code)
    kind, op = WORKLOADS[name]
    extra = ["--pg-port", "0"] if kind == "pgwire" else []
    server = harness.RefimplServer(threads=16, extra=extra, code=code)
    with server, tempfile.TemporaryDirectory() as folder:
        # Warm the caches (parse, plans, connections) before sampling.
        if kind == "pgwire":
            conninfo = pgwire.prepare_refimpl(server)
            pgwire.run_phase(conninfo, op, 16, procs, 1.0, 10**12)
        else:
            target = bench_http.prepare_refimpl(server, "lean")
            bench_http.run_phase(target, op, 16, procs, 1.0, 10**12)
        raw = Path(folder) / "stacks.txt"
        spy = _spy(server.pid, seconds + 2 * harness.CLIENT_WARMUP, raw)
        if kind == "pgwire":
            figures = pgwire.run_phase(conninfo, op, 16, procs, seconds, 0, server.pid)
        else:
            figures = bench_http.run_phase(target, op, 16, procs, seconds, 0)
        spy.wait()
        stacks = clean(raw.read_text())
    (out / f"{name}.txt").write_text(stacks)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("profiles"))
    parser.add_argument("--seconds", type=float, default=8.0, help="sampled time per workload")
    parser.add_argument("--procs", type=int, default=4, help="load generator processes (max)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--code", type=Path, help="another checkout's server to sample")
    parser.add_argument("--budget", nargs="+", type=Path, help="collapsed stacks to read")
    args = parser.parse_args()
    if args.budget:
        shares = [budget(path.read_text()) for path in args.budget]
        stages = sorted({s for share in shares for s in share}, key=lambda s: -shares[0].get(s, 0))
        print("stage | " + " | ".join(path.name for path in args.budget))
        for stage in stages:
            print(f"{stage} | " + " | ".join(f"{100 * s.get(stage, 0):.1f}%" for s in shares))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.workloads.split(","):
        figures = profile(name, args.seconds, args.procs, args.out, args.code)
        print(f"{name}: {figures['rate']:.0f} req/s, {figures.get('cpu_ms', 0):.3f} ms CPU/req")


if __name__ == "__main__":
    main()
