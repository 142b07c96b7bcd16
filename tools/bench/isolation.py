"""Isolation: does one user's costly waiting work hold anyone else's events?

A victim (the admin) holds 10 `/stream/changes` streams and one `/api/changes` long poll
of a table `ticks`, and a writer of its own commits a tick every 50 ms; each tick's
commit-to-event time (from the moment the write is sent to the event's arrival, at every
stream and at the long poll) is measured, first on an idle server, then while 8 hostile
clients, each a READ user of its own and each within its own limits, do the costliest
waiting work they may:

- 3 streams of `docs` with the costliest `where=` that stays within the statement timeout
  over 300 KB texts (a commit of such a text every second): a regular expression of 1,500
  optional parts (`a?a?...b`, 3,000 steps of RE2's automaton, about 0.2 s a text), OR-ed
  with a LIKE of an 8 KB pattern;
- 2 long polls of `docs` whose `where=` is over it (2,000 optional parts: RE2 would take
  39 s a text, so each is stopped with the statement timeout's 400 once that is clear),
  asked again as soon as answered;
- 2 live queries with `offsets=true` of a top 10 in no kept order over `big` (--rows rows;
  a row of it updated twice a second): each commit re-runs a sort of the whole table;
- 1 user reading initial copies of `big` (2 pages of 10,000 rows at a time), on and on.

A prober asks `GET /health` every 20 ms throughout. Printed: the victim's p50/p99/max
idle and loaded, `/health` p99 idle and loaded, the server's RSS growth during the load,
and what the hostile clients got (answers by status); the victim's events are counted per
committed tick and reader (`victim events: got/expected` fails on any tick missing or got
twice; the notes under the table name each reader's missing ticks, resets, refusals and end
comments; one more commit after a loss tells a stream not woken from one that dropped
events); targets: victim p99 < 100 ms, RSS growth < 200 MB, `/health` p99 < 50 ms. The
machine's load average (1 minute) is printed beside each phase, and the loaded phase's
p99s over the idle ones: on a machine shared with other work the absolute figures move
with its load, the ratios much less.

    python tools/bench/isolation.py              # 300,000 rows, 20 s idle and 30 s loaded
    python tools/bench/isolation.py --quick      # 50,000 rows, 8 s idle and 15 s loaded
    python tools/bench/isolation.py --quick --kinds stream,poll   # only the where= filters
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import harness
import requests

VICTIM_STREAMS = 10
TICK_EVERY = 0.050
# How long after its last tick the victim waits for the events still on their way.
LAST_EVENTS_WITHIN = 30.0
PROBE_EVERY = 0.020
TEXT = "a" * 300_000
PATTERN = "%" + "a_" * 4000 + "b%"
# RE2's automaton keeps up to about 1,500 optional parts; past that it steps through every
# state at each character (2,000: 39 s over one text).
WHERE = f"body ~ '{'a?' * 1500}b' OR body LIKE '{PATTERN}'"
WHERE_OVER = f"body ~ '{'a?' * 2000}b'"
TOP = "SUBSCRIBE SELECT id, v, name FROM big ORDER BY name DESC, v LIMIT 10"
TARGET_VICTIM_P99_MS = 100.0
TARGET_RSS_MB = 200.0
TARGET_HEALTH_P99_MS = 50.0
CHUNK_ROWS = 50_000


def load(server: harness.RefimplServer, rows: int) -> dict[str, str]:
    """The tables, the victim's tokens (v0..v3) and the hostile users' (h1..h8)."""
    server.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
    server.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
    server.sql("CREATE TABLE big (id INT PRIMARY KEY, v INT, name STRING)")
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
    for n in range(1, 9):
        server.sql(f"CREATE USER h{n}")
        server.sql(f"GRANT READ ON DATABASE demo TO h{n}")
        tokens[f"h{n}"] = server.sql(f"CREATE TOKEN FOR h{n}")["dataset"][0][0]
    return tokens


# --- the victim ---------------------------------------------------------------------------


def _sse_blocks(response: requests.Response) -> Iterator[tuple[str, str, str, list[str]]]:
    """The stream's blocks as (id, event, data, comments), as an `EventSource` parses them."""
    text = ""
    for chunk in response.iter_content(chunk_size=None):
        text += chunk.decode()
        while "\n\n" in text:
            block, text = text.split("\n\n", 1)
            ident = event = data = ""
            comments = []
            for line in block.split("\n"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if not name:
                    comments.append(value)
                elif name == "id":
                    ident = value
                elif name == "event":
                    event = value
                elif name == "data":
                    data = value
            yield ident, event, data, comments


def _victim(url: str, tokens: list[str], seconds: float, queue: Any) -> None:
    """10 streams and a long poll of `ticks`, and the writer of the ticks.

    Puts (latencies in s, events got, events expected, notes): a tick counts once per reader
    that got it exactly once, expected is the ticks whose INSERT answered 200 times the
    readers, and the notes say every reader's answers other than 200, its resets, its end
    comments and its ticks missing or got twice. A stream that ends is reconnected with
    `Last-Event-ID`, as an `EventSource` does, so an end the spec allows loses nothing.
    """
    headers = {"Authorization": f"Bearer {tokens[0]}"}
    sent: dict[int, float] = {}
    committed: set[int] = set()
    readers = VICTIM_STREAMS + 1
    got: list[Counter[int]] = [Counter() for _ in range(readers)]
    notes: list[str] = []
    worst = [(0.0, 0.0)] * readers  # each reader's latest event: (latency, its commit's time)
    latencies: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()
    began = time.monotonic()

    def note(reader: int, text: str) -> None:
        with lock:
            notes.append(f"{time.monotonic() - began:7.2f}s reader {reader}: {text}")

    def arrived(reader: int, ident: int) -> None:
        now = time.monotonic()
        with lock:
            got[reader][ident] += 1
            at = sent.get(ident)
            if at is not None and got[reader][ident] == 1:
                latencies.append(now - at)
                if now - at > worst[reader][0]:
                    worst[reader] = (now - at, at - began)

    def stream(reader: int, token: str) -> None:
        last = ""
        while not stop.is_set():
            asked = {"Authorization": f"Bearer {token}"}
            if last:
                asked["Last-Event-ID"] = last
            try:
                response = requests.get(
                    f"{url}/stream/changes?db=demo&table=ticks",
                    headers=asked,
                    stream=True,
                    timeout=(10, 60),
                )
            except requests.RequestException as error:
                note(reader, f"connect failed: {error}")
                time.sleep(0.5)
                continue
            if response.status_code != 200:
                note(reader, f"answer {response.status_code}: {response.text[:200]}")
                response.close()
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            try:
                for ident, event, data, comments in _sse_blocks(response):
                    last = ident or last
                    for comment in comments:
                        if comment != "heartbeat":
                            note(reader, f"comment {comment!r} (last id {last})")
                    if event == "change":
                        arrived(reader, json.loads(data)["row"]["id"])
                    elif event == "reset":
                        note(reader, f"reset, id {ident!r}")
                    if stop.is_set():
                        break
            except requests.RequestException as error:
                note(reader, f"read failed: {error}")
            response.close()
            if not stop.is_set():
                note(reader, f"stream ended; reconnecting after {last}")

    def long_poll(reader: int) -> None:
        http = harness.LeanHTTP(url, headers)
        status, _, body = http.request(
            "GET", "/api/changes?db=demo&table=ticks&format=json&limit=1"
        )
        position = json.loads(body)["durable_lsn"]
        while not stop.is_set():
            target = f"/api/changes?db=demo&table=ticks&format=json&from={position}&wait=5000"
            status, _, body = http.request("GET", target)
            if status != 200:
                note(reader, f"answer {status}: {body[:200]!r}")
                time.sleep(0.05)
                continue
            for piece in body.split(b'"row":{"id":')[1:]:
                arrived(reader, int(piece.split(b",", 1)[0].split(b"}", 1)[0]))
            position = json.loads(body)["next"]

    threads = [
        threading.Thread(target=stream, args=(n, tokens[n % len(tokens)]), daemon=True)
        for n in range(VICTIM_STREAMS)
    ]
    threads.append(threading.Thread(target=long_poll, args=(VICTIM_STREAMS,), daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every stream open
    writer = harness.LeanHTTP(url, headers)
    until = time.monotonic() + seconds
    ident = int(time.time() * 1000) % 1_000_000_000
    while time.monotonic() < until:
        ident += 1
        with lock:
            sent[ident] = time.monotonic()
        status, _, body = writer.request(
            "POST", "/exec?db=demo", f"INSERT INTO ticks VALUES ({ident}, 1)".encode()
        )
        if status == 200:
            committed.add(ident)
        else:
            note(VICTIM_STREAMS + 1, f"INSERT of tick {ident}: {status} {body[:200]!r}")
        time.sleep(TICK_EVERY)
    # Every event of a commit is awaited (an event that comes later than this is lost).
    deadline = time.monotonic() + LAST_EVENTS_WITHIN

    def complete() -> bool:
        with lock:
            return all(committed <= set(counts) for counts in got)

    while time.monotonic() < deadline and not complete():
        time.sleep(0.05)
    with lock:
        received = sum(1 for counts in got for i in committed if counts[i] == 1)
        for reader, counts in enumerate(got):
            missing = sorted(committed - set(counts))
            twice = sorted(i for i, n in counts.items() if n > 1)
            if missing:
                notes.append(f"reader {reader}: {len(missing)} ticks missing: {_spans(missing)}")
            if twice:
                notes.append(f"reader {reader}: {len(twice)} ticks got twice: {_spans(twice)}")
            if worst[reader][0] > 1.0:
                late, at = worst[reader]
                notes.append(f"reader {reader}: an event {late:.1f} s late (sent at {at:.1f} s)")
    if received < len(committed) * readers:
        # Tells a stream that was not woken for the last commits (their events come with
        # the next commit) from one that dropped them (they never come).
        writer.request(
            "POST", "/exec?db=demo", f"INSERT INTO ticks VALUES ({ident + 1}, 1)".encode()
        )
        nudged = time.monotonic() + 5.0
        while time.monotonic() < nudged and not complete():
            time.sleep(0.05)
        with lock:
            late = sum(1 for counts in got for i in committed if counts[i] == 1) - received
        notes.append(f"after one more commit, {late} of the missing events came")
    stop.set()
    queue.put((latencies, received, len(committed) * readers, notes))


def _spans(idents: list[int]) -> str:
    """Runs of consecutive ticks, `a-b`, for a note a person reads."""
    spans: list[list[int]] = []
    for ident in idents:
        if spans and ident == spans[-1][1] + 1:
            spans[-1][1] = ident
        else:
            spans.append([ident, ident])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def _prober(url: str, seconds: float, queue: Any) -> None:
    http = harness.LeanHTTP(url)
    times: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        http.request("GET", "/health")
        times.append(time.monotonic() - started)
        time.sleep(PROBE_EVERY)
    queue.put(times)


# --- the hostile clients -------------------------------------------------------------------


KINDS = {"filtered_stream": "stream", "filtered_poll": "poll", "top_n": "top", "copies": "copy"}


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
    work = [(f, u) for f, u in every if KINDS[f.__name__] in kinds]
    threads = [threading.Thread(target=f, args=(tokens[u],), daemon=True) for f, u in work]
    threads.append(threading.Thread(target=writer, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()) + 30)
    queue.put(dict(statuses))


# --- the run --------------------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def phase(
    server: harness.RefimplServer, tokens: dict[str, str], kinds: set[str], seconds: float
) -> dict[str, Any]:
    """The victim and the prober, with the hostile clients of `kinds` (none: idle)."""
    queue: Any = multiprocessing.Queue()
    mine = [t for name, t in tokens.items() if name.startswith("v")]
    victim = multiprocessing.Process(target=_victim, args=(server.url, mine, seconds, queue))
    prober = multiprocessing.Process(target=_prober, args=(server.url, seconds + 1, queue))
    processes = [victim, prober]
    if kinds:
        hostile = (server.url, server.token, tokens, kinds, seconds + 1, queue)
        processes.append(multiprocessing.Process(target=_hostile, args=hostile))
    rss_before = _rss_mb(server.pid)
    rss_most = rss_before
    load_before = os.getloadavg()[0]
    for process in processes:
        process.start()
    got: list[Any] = []
    while len(got) < len(processes):
        try:
            got.append(queue.get(timeout=0.5))
        except Exception:  # noqa: BLE001 - queue.Empty: look at the RSS meanwhile
            pass
        rss_most = max(rss_most, _rss_mb(server.pid))
    for process in processes:
        process.join(60)
    result: dict[str, Any] = {
        "rss_growth_mb": rss_most - rss_before,
        "statuses": {},
        "load": (load_before + os.getloadavg()[0]) / 2,
    }
    for item in got:
        if isinstance(item, tuple):
            result["victim"], result["received"], result["expected"], result["notes"] = item
        elif isinstance(item, list):
            result["health"] = item
        else:
            result["statuses"] = item
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--kinds",
        default="stream,poll,top,copy",
        help="the hostile work, comma-separated: stream (where= streams), poll (where= long"
        " polls), top (top-N live queries), copy (initial copies)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rows, args.idle_seconds, args.seconds = 50_000, 8.0, 15.0
    with harness.RefimplServer() as server:
        tokens = load(server, args.rows)
        idle = phase(server, tokens, set(), args.idle_seconds)
        loaded = phase(server, tokens, set(args.kinds.split(",")), args.seconds)
    rows = []
    for name, result in (("idle", idle), ("loaded", loaded)):
        victim = harness.summary([s * 1000 for s in result.get("victim", [])])
        health = harness.summary([s * 1000 for s in result.get("health", [])])
        rows.append(
            [
                name,
                result.get("received", 0),
                result.get("expected", 0),
                victim["p50"],
                victim["p99"],
                victim["max"],
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
            "/health p99 ms",
            "RSS growth MB",
            "load avg",
        ],
        rows,
        f"victim: {VICTIM_STREAMS} streams and a long poll; {args.rows:,} rows in big",
    )
    for name, result in (("idle", idle), ("loaded", loaded)):
        for line in result.get("notes", []):
            print(f"victim, {name}: {line}")
    harness.print_table(
        ["hostile answers", "count"],
        sorted(loaded["statuses"].items()),
        "what the hostile clients got",
    )
    loaded_victim = harness.summary([s * 1000 for s in loaded.get("victim", [])])
    loaded_health = harness.summary([s * 1000 for s in loaded.get("health", [])])
    idle_victim = harness.summary([s * 1000 for s in idle.get("victim", [])])
    idle_health = harness.summary([s * 1000 for s in idle.get("health", [])])
    print(
        f"loaded over idle: victim p99 x{loaded_victim['p99'] / max(idle_victim['p99'], 1e-9):.1f},"
        f" /health p99 x{loaded_health['p99'] / max(idle_health['p99'], 1e-9):.1f}"
        f" (load average {idle['load']:.1f} idle, {loaded['load']:.1f} loaded)\n"
    )
    harness.print_checks(
        [
            harness.Check("victim commit-to-event p99, idle server (ms)", idle_victim["p99"]),
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
            harness.Check(
                "server RSS growth under load (MB)",
                loaded["rss_growth_mb"],
                f"< {TARGET_RSS_MB:g}",
                loaded["rss_growth_mb"] < TARGET_RSS_MB,
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
