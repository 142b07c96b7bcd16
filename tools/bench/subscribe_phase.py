"""`subscribe.py`'s runs against a served refimpl: the trades table and its subscriptions, the
writer's trades, one phase of waiters timed commit by commit (`phase`), and the big table's
two candle subscriptions (`big_table`). The waiters themselves are `subscribe_waiters.py`'s;
what a phase counts of the server's threads is `server_sampling.py`'s.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import re
import statistics
import threading
import time
from pathlib import Path

import harness
import requests
from candle_query import CANDLES, TRADES
from server_sampling import (
    ALL_THREADS_LAUNCHER,
    ServerCount,
    by_name,
    thread_cpu,
    thread_names,
)
from subscribe_waiters import WAIT_MS, _waiters, newest_close, parse_event

SYMBOLS = [f"S{i:04d}" for i in range(1000)]
WATCHED = SYMBOLS[:10]
MAX_SUBSCRIPTIONS = 10_000  # the server's, all of them one user's here


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def load(
    server: harness.RefimplServer,
    per_symbol: int,
    symbols: list[str],
    span_hours: float = 1.0,
    chunk: int = 100_000,
) -> None:
    """per_symbol trades of each symbol over the last span_hours, priced 100.."""
    server.sql(TRADES)
    base = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=span_hours + 0.1)
    step = span_hours * 3600 / max(1, per_symbol)
    lines: list[str] = []
    for k in range(per_symbol):
        stamp = base + datetime.timedelta(seconds=k * step)
        text = f"{stamp:%Y-%m-%dT%H:%M:%S.%f}"
        for i, symbol in enumerate(symbols):
            lines.append(f"{text[:-3]}{i % 1000:03d}Z,{symbol},{100 + (k + i) % 13}\n")
            if len(lines) >= chunk:
                server.import_csv("trades", "time,symbol,price\n" + "".join(lines))
                lines = []
    if lines:
        server.import_csv("trades", "time,symbol,price\n" + "".join(lines))


def create_subscriptions(
    server: harness.RefimplServer, symbols: list[str], threads: int = 8
) -> list[str]:
    """One subscription per entry of symbols (snapshot requests); their ids, in order."""
    ids = [""] * len(symbols)

    def work(part: int) -> None:
        session = requests.Session()
        for n in range(part, len(symbols), threads):
            response = session.get(
                f"{server.url}/api/subscribe",
                params={"query": CANDLES.format(symbol=symbols[n]), "wait": "0"},
                headers=server.headers,
                timeout=60,
            )
            response.raise_for_status()
            ids[n] = parse_event(response.text)[0]
        session.close()

    workers = [threading.Thread(target=work, args=(p,)) for p in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return ids


def trade_writer(server: harness.RefimplServer) -> harness.LeanHTTP:
    """The writer's connection: a trade's price is its clock just before the request, so
    what the client spends from there to the send counts in every latency; `requests` took
    0.7-0.9 ms there (p50; p99 2-10 ms under load), this client 60 µs (p99 130-160)."""
    return harness.LeanHTTP(server.url, server.headers)


def commit_trade(writer: harness.LeanHTTP, symbol: str) -> None:
    sent = time.monotonic()
    sql = f"INSERT INTO trades VALUES ('{now_text()}', '{symbol}', {sent!r})"
    status, _, body = writer.request("POST", "/exec", sql.encode(), {"Content-Type": "text/plain"})
    if status != 200:
        raise RuntimeError(f"the trade's INSERT answered {status}: {body[:200]!r}")


# What a waiter process gives: its samples, each (the trade's clock, read latency, arrival
# latency or None: a long poll's), and its count of errors.
Gathered = list[tuple[list[tuple[float, float, float | None]], int]]


def latency_figures(gathered: Gathered, last: float, stream: bool) -> dict[str, float]:
    """The latency figures of the samples of the trades before `last` (milliseconds): n,
    p50, p99, max of the reads; with `stream`, the arrival p50 and p99 and a commit's last
    arrival (median over commits), NaN when no part came (a run with no samples has every
    figure a run with samples has)."""
    samples = [lat * 1000 for r, _ in gathered for sent, lat, _ in r if sent < last]
    figures = harness.summary(samples)
    arrivals = [a * 1000 for r, _ in gathered for sent, _, a in r if sent < last and a is not None]
    if stream and not arrivals:  # no part came
        figures["arrival p50"] = figures["arrival p99"] = figures["last arrival p50"] = math.nan
    elif arrivals:
        # The same commits' parts by their arrival at the waiters' sockets (streams only).
        arrived = harness.summary(arrivals)
        figures["arrival p50"], figures["arrival p99"] = arrived["p50"], arrived["p99"]
        # Each commit's last part to arrive (its pass's last send), the median over commits.
        lasts: dict[float, float] = {}
        for r, _ in gathered:
            for sent, _, a in r:
                if sent < last and a is not None:
                    lasts[sent] = max(lasts.get(sent, 0.0), a * 1000)
        figures["last arrival p50"] = statistics.median(lasts.values())
    return figures


def phase(
    total: int,
    commits: int,
    interval: float,
    profile: Path | None = None,
    stream: bool = False,
    lean: bool = False,
    *,
    per_symbol: int = 10,
    code: Path | None = None,
    every_thread: bool = False,
    opcodes: bool = False,
    pin: bool = False,
    instructions: bool = False,
    keep: Path | None = None,
    samples: list[tuple[float, float, float | None]] | None = None,
) -> dict[str, float]:
    """`total` subscriptions, the last 100 of them (100 / `per_symbol` watched symbols x
    `per_symbol`) waiting; with `profile`, the server's worker threads are profiled into that
    file; with `stream`, each waiter reads one stream of its subscription (`stream=true`)
    instead of long polls (`lean`: a process's streams on one thread, parsed at the end:
    `subscribe_waiters._lean_stream_waiters`); `code`: the checkout whose server runs (this
    one's by default); `every_thread`: `profile` holds every thread's profile, not only the
    requests'; `opcodes`: the server's threads count the Python opcodes they run during the
    commits (`server_sampling.OPCODES_LAUNCHER`), given as "op <thread group>
    <file>:<function>" per commit; `pin`: the server on the first CPU alone, the waiters and
    the writer on the others (`harness.pin_apart`); `instructions`: the server runs under
    callgrind (`server_sampling.INSTRUCTIONS_LAUNCHER`), which counts the machine
    instructions of all its threads during the commits, given as "instructions" per commit
    (their callgrind output copied to `keep`, if given); `samples`, if given, gets the
    measured commits' samples, each (the trade's clock, read latency, arrival latency or
    None), in seconds."""
    # Every subscription is the admin's: it may keep as many as the server does.
    per_user = {"KDB_SUBSCRIPTIONS_PER_USER": str(MAX_SUBSCRIPTIONS)}
    launcher = ALL_THREADS_LAUNCHER if every_thread else None
    count = ServerCount.make(instructions) if opcodes or instructions else None
    if count is not None:
        launcher, profile = count.launcher, count.out
    with harness.RefimplServer(
        threads=512, env=per_user, profile=profile, code=code, launcher=launcher
    ) as server:
        if pin:
            harness.pin_apart(server)
        load(server, 5, SYMBOLS)
        idle_symbols, watched, symbols = phase_subscriptions(total, per_symbol)
        began = time.monotonic()
        create_subscriptions(server, idle_symbols)
        ids = create_subscriptions(server, watched)
        made = time.monotonic() - began
        target = {"url": server.url, "token": server.token, "stream": stream, "lean": lean}
        context = multiprocessing.get_context("fork")
        stop, ready, results = context.Event(), context.Value("i", 0), context.Queue()
        pairs = list(zip(watched, ids, strict=True))
        procs = [
            context.Process(target=_waiters, args=(target, pairs[p::4], stop, ready, results))
            for p in range(4)
        ]
        for process in procs:
            process.start()
        while ready.value < len(pairs):
            time.sleep(0.05)
        time.sleep(2.0)  # every waiter has asked and waits
        session, writer = requests.Session(), trade_writer(server)
        kept_before = kept_subscriptions(session, server)
        cpu_before = harness.cpu_seconds(server.pid)
        threads_before = thread_cpu(server.pid)
        if count is not None:
            count.start(server.pid)
        started = time.monotonic()
        for k in range(commits):
            commit_trade(writer, symbols[k % len(symbols)])
            time.sleep(max(0.0, started + (k + 1) * interval - time.monotonic()))
        time.sleep(0.5)
        if count is not None:
            count.stop(server.pid)
        cpu = harness.cpu_seconds(server.pid) - cpu_before
        # Read before py-spy's look, which stops and resumes every thread: two runs each,
        # some 10 a commit of 100 for a pool of 512 workers that no request caused.
        threads_after = thread_cpu(server.pid)
        kept_after = kept_subscriptions(session, server)
        names = thread_names(server.pid) if threads_before else {}
        stop.set()
        last = time.monotonic()
        for symbol in symbols:  # wakes every waiter, which then sees the stop
            commit_trade(writer, symbol)
        # Each process's samples, errors and wrong trades (`TradeOrder`).
        got = [results.get(timeout=WAIT_MS / 1000 + 120) for _ in procs]
        gathered: Gathered = [(samples, errors) for samples, errors, _ in got]
        for process in procs:
            process.join(30)
        if pin:
            harness.unpin()
        if any(errors for _, errors in gathered):
            # Whatever the server said about them (a failed request is a figure's cause).
            output = "".join(server.output)
            at = output.find("Traceback")
            print(output[at : at + 3000] if at >= 0 else output[-3000:])
    figures = latency_figures(gathered, last, stream)
    if samples is not None:
        samples += [s for got, _ in gathered for s in got if s[0] < last]
    figures["expected"] = sum(watched.count(symbols[k % len(symbols)]) for k in range(commits))
    figures["errors"] = sum(e for _, e in gathered)
    figures["wrong"] = sum(wrong for _, _, wrong in got)
    figures["cpu_ms"] = cpu / commits * 1000
    # What the server kept as the measured commits began and as they ended: fewer than made
    # when the limit or the sweep of unasked ones dropped some, the sweep's cost then counted.
    figures["kept"] = kept_before
    figures["kept after"] = kept_after
    figures["made_per_s"] = (len(idle_symbols) + len(watched)) / made
    for name, (spent, runs) in by_name(threads_before, threads_after, names).items():
        if spent / commits * 1000 >= 0.05:  # CPU ms a commit
            figures[f"thread {name}"] = spent / commits * 1000
            figures[f"runs {name}"] = runs / commits
    if count is not None:
        figures.update(count.figures(commits, keep))
    return figures


def phase_subscriptions(total: int, per_symbol: int) -> tuple[list[str], list[str], list[str]]:
    """The symbols of a phase of `total` subscriptions: its idle subscriptions' (`total` - 100
    of them over 100, ten to a symbol not watched, none under), its waiters' (min(`total`,
    100) of them, one entry each: `per_symbol` to a watched symbol, all on one symbol when
    fewer, at most 10 symbols, the waiters spread evenly over them when the counts do not
    divide), and the watched symbols the writer's commits go to in turn (a commit wakes
    the waiters of one)."""
    waiting = min(total, 100)
    symbols = WATCHED[: max(1, waiting // per_symbol)]
    watched = [symbols[n * len(symbols) // waiting] for n in range(waiting)]
    idle = [s for s in SYMBOLS[len(WATCHED) :] for _ in range(10)][: max(0, total - 100)]
    return idle, watched, symbols


def kept_subscriptions(session: requests.Session, server: harness.RefimplServer) -> int:
    """The live queries the server keeps now (its /metrics gauge kdb_subscriptions)."""
    response = session.get(f"{server.url}/metrics", headers=server.headers, timeout=600)
    response.raise_for_status()
    found = re.search(r"^kdb_subscriptions (\S+)$", response.text, re.MULTILINE)
    assert found is not None, "/metrics has no kdb_subscriptions"
    return int(float(found.group(1)))


def big_table(rows: int, commits: int) -> dict[str, dict[str, float]]:
    """Median latency of a candle subscription over a table of `rows` trades."""
    hot_rows = rows // 10
    per_symbol = (rows - hot_rows) // (len(SYMBOLS) - 1)
    out: dict[str, dict[str, float]] = {}
    with harness.RefimplServer(threads=64) as server:
        began = time.monotonic()
        load(server, per_symbol, SYMBOLS[1:], span_hours=24)
        hot_per = hot_rows // 10
        for _ in range(10):  # the hot symbol's rows, 10 chunks
            now = datetime.datetime.now(datetime.UTC)
            lines = []
            for k in range(hot_per):
                stamp = now - datetime.timedelta(seconds=24 * 3600 * (1 - k / hot_per))
                lines.append(f"{stamp:%Y-%m-%dT%H:%M:%S.%fZ},{SYMBOLS[0]},{100 + k % 13}\n")
            server.import_csv("trades", "time,symbol,price\n" + "".join(lines))
        loaded = time.monotonic() - began
        total = server.stats()["databases"]["demo"]["rows"]
        print(
            f"big table: {total:,} trades loaded in {loaded:.0f} s ({per_symbol:,} per ordinary"
            f" symbol, {hot_per * 10:,} on the hot one)"
        )
        session, writer = requests.Session(), trade_writer(server)
        for name, symbol, size in (
            ("ordinary", SYMBOLS[1], per_symbol),
            ("hot", SYMBOLS[0], hot_per * 10),
        ):
            query = CANDLES.format(symbol=symbol)
            response = session.get(
                f"{server.url}/api/subscribe",
                params={"query": query, "wait": "0"},
                headers=server.headers,
                timeout=120,
            )
            response.raise_for_status()
            ident = parse_event(response.text)[0]
            samples: list[float] = []
            answered = threading.Event()

            def wait(
                ident: str = ident,
                query: str = query,
                samples: list[float] = samples,
                answered: threading.Event = answered,
            ) -> None:
                listener = requests.Session()
                give_up = time.monotonic() + commits * 2 + 60
                while len(samples) < commits and time.monotonic() < give_up:
                    try:
                        answer = listener.get(
                            f"{server.url}/api/subscribe",
                            params={"query": query, "id": ident, "wait": "5000"},
                            headers=server.headers,
                            timeout=120,
                        )
                        now = time.monotonic()
                        ident, kind, data = parse_event(answer.text)
                    except (requests.RequestException, ValueError):
                        return
                    if kind == "rows" and data and data["rows"]:
                        samples.append(now - newest_close(data))
                        answered.set()

            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            time.sleep(0.5)
            for _ in range(commits):
                answered.clear()
                commit_trade(writer, symbol)
                answered.wait(30)
                time.sleep(0.05)  # the waiter asks again
            waiter.join(60)
            figures = harness.summary([s * 1000 for s in samples])
            figures["rows"] = size
            out[name] = figures
    return out
