"""Isolation: does one user's costly waiting work hold anyone else's events?

A victim (a WRITE user) holds 10 `/stream/changes` streams and one `/api/changes` long
poll of a table `ticks`, and a writer of its own commits a tick every 50 ms; each tick's
commit-to-event time (from the moment the write is sent to the event's arrival, at every
stream and at the long poll) is measured, first on an idle server, then while hostile
clients, each a user of its own (READ in `demo`; the COPY's, WRITE in a database of its
own) and each within its own limits, do the costliest work they may (`--hostile` picks
the kinds: filters, topn, copies, pipeline, copyin, prelogin):

- (filters) 3 streams of `docs` with the costliest `where=` that stays within the
  statement timeout over 300 KB texts (a commit of such a text every second): a regular
  expression of 1,000 optional characters (`(?:.?){1000}b`, 9,005 steps of RE2's
  automaton, which gives up on it: about 4 s a text, its worst case 27 s), OR-ed with a
  LIKE of an 8 KB pattern;
- (filters) 2 long polls of `docs` whose `where=` is over it (128 optional Han characters,
  as long as allowed: 10,372 steps, whose worst case over a text is past the statement
  timeout, so each is stopped with the statement timeout's 400 before it searches), asked
  again as soon as answered;
- (topn) 2 live queries with `offsets=true` of a top 10 in no kept order over `big`
  (--rows rows; a row of it updated twice a second): each commit re-runs a sort of the
  whole table;
- (copies) 1 user reading initial copies of `big` (2 pages of 10,000 rows at a time), on
  and on;
- (pipeline) 2 protocol connections of a READ user that pipeline 1,000 queries of 14 KB
  (half simple Query, half Parse/Bind/Execute/Sync; each answered with 10 rows carrying
  the 14 KB back, 140 MB of answers a batch) without reading, hold 5 s once the server
  stops taking them, then read every answer, on and on;
- (copyin) 1 protocol connection of a WRITE user streaming `COPY sink FROM STDIN` into a
  database of its own as fast as the socket takes it, each COPY until the server refuses
  it with `53200` past `memory_mb` (the server runs with a limit of the loaded data plus
  --headroom-mb), on and on;
- (prelogin) 16 sockets to the protocol port, from another loopback address (127.0.0.2),
  that send nothing or their startup packet a byte a second, each replaced when the server
  ends it at `pg_login_timeout_s` (16 is `pg_max_unauthenticated_per_address`).

The victim also runs a protocol session of its own with a point SELECT of `big` every
100 ms (its round trip's p50/p99, idle and loaded, are printed beside the streams').

A prober asks `GET /health` every 20 ms throughout. Printed: the victim's p50/p99/max
idle and loaded, `/health` p99 idle and loaded, the server's RSS growth during the load
(and beyond the table data `memory_mb` admits: the limit less the data at the start),
and what the hostile clients got (answers by status); the victim's events are counted per
committed tick and reader (`victim events: got/expected` fails on any tick missing or got
twice; the notes under the table name each reader's missing ticks, resets, refusals and end
comments; one more commit after a loss tells a stream not woken from one that dropped
events); targets: victim p99 < 100 ms, RSS growth beyond what `memory_mb` admits < 200 MB,
`/health` p99 < 50 ms. The machine's load average (1 minute) is printed beside each
phase, and the loaded phase's p99s over the idle ones: on a machine shared with other work
the absolute figures move with its load, the ratios much less.

The server's `memory_mb` is set from the row count, and a table of 120 KB rows fills it up to
the headroom once the data is loaded. Every client process and the server are stopped at
the end, on Ctrl-C too.

    python tools/bench/isolation.py              # 300,000 rows, 20 s idle and 30 s loaded
    python tools/bench/isolation.py --quick      # 50,000 rows, 8 s idle and 15 s loaded,
                                                 # 32 MB of headroom under memory_mb
    python tools/bench/isolation.py --quick --hostile filters   # only the where= filters
    python tools/bench/isolation.py --quick --gil-profile       # who holds the interpreter lock
    python tools/bench/isolation.py --quick --code OTHER_CHECKOUT   # another revision's server

While the loaded phase runs, a py-spy dump of the server's threads is written whenever a
`/health` answer is 5 s late or no event of `ticks` came for 5 s (`--stall-dump`, 0: none;
`isolation_watch.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from queue import Empty
from typing import Any
from urllib.parse import quote

import harness
import isolation_pg
import isolation_victim
import isolation_watch
import requests

TEXT = "a" * 300_000
PATTERN = "%" + "a_" * 4000 + "b%"
# RE2's automaton gives up on this one and steps through every state at each character
# (about 4 s over one text); patterns are at most 1,024 characters.
WHERE = f"body ~ '(?:.?){{1000}}b' OR body LIKE '{PATTERN}'"
WHERE_OVER = "body ~ '" + "\\p{Han}?" * 128 + "'"
TOP = "SUBSCRIBE SELECT id, v, name FROM big ORDER BY name DESC, v LIMIT 10"
TARGET_VICTIM_P99_MS = 100.0
TARGET_RSS_MB = 200.0
TARGET_HEALTH_P99_MS = 50.0
CHUNK_ROWS = 50_000
HOSTILE = ("filters", "topn", "copies", "pipeline", "copyin", "prelogin")
# Each HTTP client function of `_hostile`, by the `--hostile` kind that turns it on.
HTTP_KINDS = {
    "filtered_stream": "filters",
    "filtered_poll": "filters",
    "top_n": "topn",
    "copies": "copies",
}
PG_KINDS = {"pipeline", "copyin", "prelogin"}
MB = 1024 * 1024
# The server starts with memory_mb of the rows of `big` as this many bytes each (more than
# they count: about 420) and this slack, plus the headroom; `ballast` then fills the limit
# up to the headroom, so that the limit needs no restart once the data is known.
BYTES_PER_ROW_AT_MOST = 600
BALLAST_SLACK_MB = 8


def load(server: harness.RefimplServer, rows: int) -> dict[str, str]:
    """The tables, the victim's tokens (v0..v3) and the hostile users' (h1..h10)."""
    server.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
    server.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
    server.sql("CREATE TABLE big (id INT PRIMARY KEY, v INT, name STRING)")
    server.sql("CREATE TABLE ballast (id INT PRIMARY KEY, body STRING)")
    for start in range(0, rows, CHUNK_ROWS):
        lines = ["id,v,name\n"]
        lines += [
            f"{i},{i % 997},n{i * 7919 % 1_000_003}\n"
            for i in range(start, min(rows, start + CHUNK_ROWS))
        ]
        server.import_csv("big", "".join(lines))
    server.sql("CREATE USER victim")
    server.sql("GRANT WRITE ON DATABASE demo TO victim")
    # A token holds at most 3 streams (streams_per_token): the victim's 10 take 4 tokens.
    tokens = {f"v{n}": server.sql("CREATE TOKEN FOR victim")["dataset"][0][0] for n in range(4)}
    for n in range(1, 11):
        server.sql(f"CREATE USER h{n}")
        server.sql(f"GRANT READ ON DATABASE demo TO h{n}")
        tokens[f"h{n}"] = server.sql(f"CREATE TOKEN FOR h{n}")["dataset"][0][0]
    # The COPY user writes in a database of its own: the victim's data is not its target.
    server.sql("CREATE DATABASE hostile")
    requests.post(
        f"{server.url}/exec?db=hostile",
        data=b"CREATE TABLE sink (id INT PRIMARY KEY, body STRING)",
        headers=server.headers,
        timeout=60,
    ).raise_for_status()
    server.sql("GRANT WRITE ON DATABASE hostile TO h10")
    return tokens


BALLAST_ROW = 120_000  # bytes of a ballast row's text: under /imp's field limit of 128 KB


def ballast(server: harness.RefimplServer, level: int) -> None:
    """Rows of 120 KB in `ballast` until the table data is within 1 MB under `level` bytes."""
    ident = 0
    while (gap := level - used_bytes(server)) > MB:
        rows = min(gap // BALLAST_ROW, 32 * MB // BALLAST_ROW)  # under max_body_mb a request
        lines = ["id,body\n"] + [f"{ident + n},{'b' * BALLAST_ROW}\n" for n in range(rows)]
        server.import_csv("ballast", "".join(lines))
        ident += rows


def used_bytes(server: harness.RefimplServer) -> int:
    """The table data of every database, as the memory limit counts it."""
    response = requests.get(f"{server.url}/api/stats?db=demo", headers=server.headers, timeout=60)
    response.raise_for_status()
    return int(response.json()["databases"]["demo"]["memory"]["used_bytes"])


# --- the hostile clients -------------------------------------------------------------------


def _hostile(
    url: str, admin: str, tokens: dict[str, str], kinds: set[str], seconds: float, queue: Any
) -> None:
    """The 8 hostile users' work, and the commits that make it costly; statuses by kind."""
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    until = time.monotonic() + seconds
    where, where_over = quote(WHERE), quote(WHERE_OVER)

    def count(kind: str, status: int) -> None:
        with lock:
            statuses[f"{kind} {status}"] += 1

    def filtered_stream(token: str) -> None:
        while time.monotonic() < until:
            response = requests.get(
                f"{url}/stream/changes?db=demo&table=docs&where={where}",
                headers={"Authorization": f"Bearer {token}"},
                stream=True,
                timeout=(10, 120),
            )
            count("where= stream", response.status_code)
            try:
                for _ in response.iter_content(chunk_size=None):
                    if time.monotonic() > until:
                        break
            except requests.RequestException:
                pass
            response.close()

    def filtered_poll(token: str) -> None:
        http = harness.LeanHTTP(url, {"Authorization": f"Bearer {token}"})
        while time.monotonic() < until:
            target = f"/api/changes?db=demo&table=docs&format=json&where={where_over}&wait=20000"
            status, _, body = http.request("GET", target + "&limit=1")
            count("where= long poll", status)
            if status == 200:
                position = body.split(b'"durable_lsn":', 1)[1].split(b",", 1)[0].split(b"}", 1)[0]
                status, _, _ = http.request("GET", f"{target}&from={int(position)}")
                count("where= long poll", status)

    def top_n(token: str) -> None:
        http = harness.LeanHTTP(url, {"Authorization": f"Bearer {token}"})
        asked = ""
        while time.monotonic() < until:
            target = f"/api/subscribe?db=demo&offsets=true&wait=20000&query={quote(TOP)}"
            status, _, body = http.request("GET", target + (f"&id={asked}" if asked else ""))
            count("top-N live query", status)
            for line in body.split(b"\n"):
                if line.startswith(b"id: "):
                    asked = line[4:].decode()
            if status != 200:
                time.sleep(0.1)

    def copies(token: str) -> None:
        http = harness.LeanHTTP(url, {"Authorization": f"Bearer {token}"})
        position = ""
        while time.monotonic() < until:
            target = "/api/changes?db=demo&table=big&initial=true&format=json&limit=10000"
            status, _, body = http.request(
                "GET", target + (f"&from={position}" if position else "")
            )
            count("initial copy page", status)
            if status != 200:
                time.sleep(0.1)
                position = ""
                continue
            more = b'"more":true' in body
            position = (
                body.split(b'"next":', 1)[1].split(b",", 1)[0].strip(b'"}').decode() if more else ""
            )

    def writer() -> None:
        http = harness.LeanHTTP(url, {"Authorization": f"Bearer {admin}"})
        n = 0
        while time.monotonic() < until:
            n += 1
            http.request(
                "POST", "/exec?db=demo", f"INSERT INTO docs VALUES ({n}, '{TEXT}')".encode()
            )
            for _ in range(2):
                http.request(
                    "POST",
                    "/exec?db=demo",
                    f"UPDATE big SET v = v + 1 WHERE id = {n * 7 % 1000}".encode(),
                )
                time.sleep(0.5)

    every = [
        (filtered_stream, "h1"), (filtered_stream, "h2"), (filtered_stream, "h3"),
        (filtered_poll, "h4"), (filtered_poll, "h5"),
        (top_n, "h6"), (top_n, "h7"),
        (copies, "h8"), (copies, "h8"),
    ]  # fmt: skip
    work = [(f, u) for f, u in every if HTTP_KINDS[f.__name__] in kinds]
    threads = [threading.Thread(target=f, args=(tokens[u],), daemon=True) for f, u in work]
    threads.append(threading.Thread(target=writer, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()) + 30)
    queue.put(("hostile", dict(statuses)))


# --- the run --------------------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def phase(
    server: harness.RefimplServer,
    address: isolation_pg.Address,
    tokens: dict[str, str],
    kinds: set[str],
    seconds: float,
    copy_cap: int,
) -> dict[str, Any]:
    """The victim (streams, long poll, protocol session) and the prober, with the hostile
    clients of `kinds` (none: idle). Every process it starts is ended before it returns."""
    queue: Any = multiprocessing.Queue()
    mine = [t for name, t in tokens.items() if name.startswith("v")]
    work: list[tuple[Any, tuple[Any, ...]]] = [
        (isolation_victim.victim, (server.url, mine, seconds, queue)),
        (isolation_victim.prober, (server.url, seconds + 1, queue)),
        (isolation_pg.victim_session, (address, mine[0], seconds + 1, queue)),
    ]
    if kinds & set(HTTP_KINDS.values()):
        work.append((_hostile, (server.url, server.token, tokens, kinds, seconds + 1, queue)))
    if kinds & PG_KINDS:
        pg = (address, tokens, kinds, seconds + 1, copy_cap, queue)
        work.append((isolation_pg.hostile, pg))
    processes = [
        multiprocessing.Process(target=f, args=a, name=f.__name__, daemon=True) for f, a in work
    ]
    used_before = used_bytes(server)
    rss_before = _rss_mb(server.pid)
    rss_most = rss_before
    load_before = os.getloadavg()[0]
    got: list[Any] = []
    started = time.monotonic()
    try:
        for process in processes:
            process.start()
        while len(got) < len(processes):
            try:
                got.append(queue.get(timeout=0.5))
                done = time.monotonic() - started
                print(f"        {got[-1][0]} done after {done:.1f} s", file=sys.stderr)
            except Empty:  # look at the RSS meanwhile
                if not any(process.is_alive() for process in processes):
                    break  # every figure that will come has come
            rss_most = max(rss_most, _rss_mb(server.pid))
        if len(got) < len(processes):
            codes = ", ".join(f"{p.name} {p.exitcode}" for p in processes)
            raise RuntimeError(f"a client process ended without its figures (exit codes: {codes})")
        for process in processes:
            process.join(60)
    finally:
        # Ctrl-C, a stop or a client that died: no client outlives its phase.
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(10)
    result: dict[str, Any] = {
        "rss_growth_mb": rss_most - rss_before,
        "used_before": used_before,
        "statuses": {},
        "most": {},
        "load": (load_before + os.getloadavg()[0]) / 2,
    }
    for tag, *item in got:
        if tag == "victim":
            result["victim"], result["received"], result["expected"], result["notes"] = item
        elif tag == "health":
            result["health"] = item[0]
        elif tag == "pg victim":
            result["pg"], result["pg_notes"] = item
        elif tag == "hostile":
            result["statuses"].update(item[0])
        else:
            result["statuses"].update(item[0])
            result["most"] = item[1]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--headroom-mb",
        type=int,
        default=None,
        help="memory_mb is the loaded data plus this (what one COPY may hold before 53200);"
        " 64, 32 with --quick",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--code",
        type=Path,
        default=None,
        help="the checkout whose server runs (another revision's, for a before/after run);"
        " the clients are this one's",
    )
    parser.add_argument(
        "--stall-dump",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="during the loaded phase, a py-spy dump of the server's threads when a /health"
        " answer is this late, or no event of ticks came this long (0: no watch); the dumps'"
        " files are printed",
    )
    parser.add_argument(
        "--gil-profile",
        action="store_true",
        help="py-spy record --gil of the loaded phase: who holds the interpreter lock",
    )
    parser.add_argument(
        "--hostile",
        default=",".join(HOSTILE),
        help="the hostile work, comma-separated: filters (where= streams and long polls),"
        " topn (top-N live queries), copies (initial copies), pipeline (pipelined protocol"
        " queries), copyin (COPY FROM STDIN), prelogin (connections that never log in)",
    )
    args = parser.parse_args()
    kinds = {k.strip() for k in args.hostile.split(",") if k.strip()}
    if not kinds or kinds - set(HOSTILE):
        parser.error(
            f"--hostile: unknown kind(s) {', '.join(sorted(kinds - set(HOSTILE))) or '(none)'};"
            f" choose among {', '.join(HOSTILE)}"
        )
    if args.quick:
        args.rows, args.idle_seconds, args.seconds = 50_000, 8.0, 15.0
    if args.headroom_mb is None:
        args.headroom_mb = 32 if args.quick else 64
    began = time.monotonic()

    def step(text: str) -> None:
        print(f"{time.monotonic() - began:6.1f}s {text}", file=sys.stderr, flush=True)

    limit_mb = -(-args.rows * BYTES_PER_ROW_AT_MOST // MB) + BALLAST_SLACK_MB + args.headroom_mb
    # A COPY the server does not refuse is cut off well past the limit, copying nothing.
    copy_cap = (2 * args.headroom_mb + 64) * MB
    extra = ["--pg-port", "0", "--memory", str(limit_mb)]
    folder = Path(tempfile.mkdtemp(prefix="isolation-watch-"))
    with harness.RefimplServer(extra=extra, code=args.code) as server:
        # Read at once: the server's output keeps only its latest lines.
        address = isolation_pg.pg_address(server.output)
        step(f"server pid {server.pid} (for py-spy dump --pid)")
        step(f"loading {args.rows:,} rows")
        tokens = load(server, args.rows)
        step(f"memory_mb {limit_mb}: filling all but {args.headroom_mb} MB of it")
        ballast(server, limit_mb * MB - args.headroom_mb * MB)
        step("idle phase")
        idle = phase(server, address, tokens, set(), args.idle_seconds, copy_cap)
        step("loaded phase")
        watch = (
            isolation_watch.StallWatch(
                server.url, server.token, server.pid, args.stall_dump, folder, args.seconds
            )
            if args.stall_dump > 0
            else None
        )
        with watch or contextlib.nullcontext():
            profile = (
                isolation_watch.GilProfile(server.pid, args.seconds, folder / "gil.txt")
                if args.gil_profile
                else None
            )
            loaded = phase(server, address, tokens, kinds, args.seconds, copy_cap)
            if profile is not None:
                profile.finish()
        step("stopping the server")
    report(args.rows, sorted(kinds), limit_mb, idle, loaded)
    if watch is not None:
        watch.report()
    if profile is not None:
        profile.report()


def report(
    rows: int, kinds: list[str], limit_mb: int, idle: dict[str, Any], loaded: dict[str, Any]
) -> None:
    """The figures of both phases, the hostile clients' outcomes and the checks."""

    def ms(result: dict[str, Any], key: str) -> dict[str, float]:
        return harness.summary([s * 1000 for s in result.get(key, [])])

    table = []
    for name, result in (("idle", idle), ("loaded", loaded)):
        victim, pg, health = ms(result, "victim"), ms(result, "pg"), ms(result, "health")
        table.append(
            [
                name,
                result.get("received", 0),
                result.get("expected", 0),
                victim["p50"],
                victim["p99"],
                victim["max"],
                pg["p50"],
                pg["p99"],
                health["p99"],
                result["rss_growth_mb"],
                result["load"],
            ]
        )
    harness.print_table(
        [
            "phase",
            "events",
            "expected",
            "victim p50 ms",
            "p99 ms",
            "max ms",
            "pg SELECT p50",
            "pg p99",
            "/health p99 ms",
            "RSS growth MB",
            "load avg",
        ],
        table,
        f"victim: {isolation_victim.VICTIM_STREAMS} streams, a long poll and a protocol"
        f" session's point SELECT every 100 ms; {rows:,} rows in big; memory_mb {limit_mb};"
        f" hostile: {','.join(kinds)}",
    )
    for name, result in (("idle", idle), ("loaded", loaded)):
        for line in result.get("notes", []) + result.get("pg_notes", []):
            print(f"victim, {name}: {line}")
    harness.print_table(
        ["hostile answers", "count"],
        sorted(loaded["statuses"].items()),
        "what the hostile clients got",
    )
    if loaded["most"]:
        harness.print_table(["hostile figure", "value"], sorted(loaded["most"].items()))
    idle_victim, loaded_victim = ms(idle, "victim"), ms(loaded, "victim")
    idle_pg, loaded_pg = ms(idle, "pg"), ms(loaded, "pg")
    idle_health, loaded_health = ms(idle, "health"), ms(loaded, "health")
    admitted = limit_mb - loaded["used_before"] / MB
    beyond = loaded["rss_growth_mb"] - admitted

    def over(a: float, b: float) -> str:
        return f"x{a / max(b, 1e-9):.1f}"

    print(
        f"loaded over idle: victim p99 {over(loaded_victim['p99'], idle_victim['p99'])},"
        f" protocol SELECT p99 {over(loaded_pg['p99'], idle_pg['p99'])},"
        f" /health p99 {over(loaded_health['p99'], idle_health['p99'])}"
        f" (load average {idle['load']:.1f} idle, {loaded['load']:.1f} loaded)\n"
    )
    harness.print_checks(
        [
            harness.Check("victim commit-to-event p99, idle server (ms)", idle_victim["p99"]),
            harness.Check("victim protocol point SELECT p99, idle server (ms)", idle_pg["p99"]),
            harness.Check("/health p99, idle server (ms)", idle_health["p99"]),
            harness.Check("load average (1 min), idle phase", idle["load"]),
            harness.Check("load average (1 min), loaded phase", loaded["load"]),
            *(
                harness.Check(
                    f"victim events: got/expected, {name}",
                    result.get("received", 0) / max(result.get("expected", 0), 1),
                    f"= 1 ({result.get('received', 0)}/{result.get('expected', 0)})",
                    result.get("expected", 0) > 0
                    and result.get("received") == result.get("expected"),
                    ours=result.get("received", 0),
                    peer=result.get("expected", 0),
                )
                for name, result in (("idle", idle), ("loaded", loaded))
            ),
            harness.Check(
                "victim commit-to-event p99, loaded (ms)",
                loaded_victim["p99"],
                f"< {TARGET_VICTIM_P99_MS:g}",
                loaded_victim["p99"] < TARGET_VICTIM_P99_MS,
            ),
            harness.Check("victim protocol point SELECT p99, loaded (ms)", loaded_pg["p99"]),
            harness.Check("server RSS growth under load (MB)", loaded["rss_growth_mb"]),
            harness.Check("table data memory_mb admits past the load's start (MB)", admitted),
            harness.Check(
                "server RSS growth beyond what memory_mb admits (MB)",
                beyond,
                f"< {TARGET_RSS_MB:g}",
                beyond < TARGET_RSS_MB,
            ),
            harness.Check(
                "/health p99, loaded (ms)",
                loaded_health["p99"],
                f"< {TARGET_HEALTH_P99_MS:g}",
                loaded_health["p99"] < TARGET_HEALTH_P99_MS,
            ),
        ]
    )


if __name__ == "__main__":
    main()
