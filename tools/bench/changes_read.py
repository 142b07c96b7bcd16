"""Reading the change stream: rows per second through changes() and /api/changes, against
PostgreSQL logical decoding, side by side in one run; then commit throughput with 100
waiting readers.

1. N rows (--rows, default 1,000,000) are committed into `t (id BIGINT PRIMARY KEY, v DOUBLE,
   s STRING)` in transactions of --txn-rows rows, with the embedded API; the same N rows
   into PostgreSQL 15 (wal_level=logical, a test_decoding slot made before them, COPY in
   transactions of the same size). PostgreSQL stays up for all the reads.
2. Each of --rounds rounds reads everything again, ours and PostgreSQL's alternately (which
   goes first swaps every round), and the figures are the rounds' medians:
   - `SELECT * FROM changes('t', after, 50000)` (embedded, each row a tuple of Python
     objects) beside PostgreSQL read through psycopg (a server-side cursor, 50,000 rows a
     fetch, each row a tuple of Python objects): objects on both sides.
   - For each page size of --pages and each format (JSON, SSE), a fresh `refimpl serve` (a
     page read before would be answered from the server's shared answers), read in pages
     through GET /api/changes?table=t&format=json|sse&wait=0&limit=<page>&from=<next>, each
     page going on from the `next` of the one before; beside it PostgreSQL's logical
     decoding read in pages of the same size: `SELECT lsn, xid, data FROM
     pg_logical_slot_peek_changes('bench', NULL, <page>)` (`upto_nchanges`: whole
     transactions until that many changes, as ours), one simple query a page on one
     connection, as many pages as ours. PostgreSQL's SQL functions cannot resume a peek
     from a position, so each page reads the slot's first transactions again: its best
     case at that page size, never its worst (a page resumed by `pg_logical_slot_get_changes`
     decodes the log again from the slot's restart point, which does not move while the
     rows were written within seconds, and saves the slot: 14,000 rows/s at pages of 100
     where these peeks read 180,000, load 4.4). Also, once a round, PostgreSQL reads all
     the rows in one peek (`..._peek_changes('bench', NULL, NULL)`): one round trip, the
     ceiling of its logical decoding; shown beside each page size, without a target (until
     this change that one read was the peer of every page size, so a page of 100 rows, one
     round trip of ours a hundred rows, was held against one round trip for them all).

What each side does per row (both sides count rows in the bytes they receive; neither makes
a Python object per row, so the client costs the same little on both and the figures
measure the servers):
   - ours: one keep-alive connection (a raw socket; `requests` alone spent about 0.3 ms of
     CPU on each small request, the server's own cost at pages of 100); each answer's body is
     read whole into one buffer by `recv_into`; its rows are counted as the occurrences of
     `"op":"upsert"` in it (one C call a page) and the next page's position is read from the
     end of the body (JSON's `"next":`, SSE's last `id:`).
   - PostgreSQL: one connection speaking the protocol over a raw socket (the simple query
     protocol; trust login), its bytes read into a buffer by `recv_into` as they come and
     the rows counted as the occurrences of `table public.t: INSERT` in them (one C call a
     buffer), until the ReadyForQuery that ends the answer; one such query a page.
`--decode` reads the JSON pages the other fair way, building an object per row on both
sides: msgspec decodes each page into one struct per change (its `row` left as JSON text,
as test_decoding's `data` is text) against psycopg's tuple per row (server-side cursor).

The servers' CPU per row read is printed beside the rates: the refimpl server process's
(utime+stime of all its threads, /proc/<pid>/stat, over each read) and the PostgreSQL
backend's that answers the read (/proc/<backend pid>/stat); also the reading client's own
CPU per row (this process, `time.process_time`). The load average is printed with every
round. `runq us/row` is the time the server's threads (PostgreSQL's: its backend's) were
runnable but waited for a core (/proc/<pid>/task/*/schedstat), per row: on a loaded machine
it, not the CPU, sets the rate at pages of 10,000. A page of 10,000 rows is one burst of
about 8 ms of a worker's CPU, which the scheduler preempts (5-9 times a page at load 4) and
queues behind the other runnable work, where a page of 1,000 ends within its slice: at load
4, a page of 10,000 waited 1.2-7.3 ms on the run queue against 0.02-0.09 for one of 1,000
(pages read one at a time, 10 ms apart). The send is not it: one send of the whole
answer (1.38 MB), no EAGAIN, the client's last byte 0.02-0.3 ms after its first.

3. Single-row commits through /exec (4 writer threads, --seconds) with no reader, then with
   100 readers (4 processes of 25 threads) waiting on /api/changes and woken by every commit.

Targets: changes() rows/s >= 0.5x PostgreSQL's; /api/changes (JSON and SSE, at each page size)
>= 1.2x PostgreSQL's read in pages of that size; commit throughput with 100 waiting readers
>= 0.5x that with none.

    python tools/bench/changes_read.py                  # full: 1,000,000 rows, ~15 minutes
    python tools/bench/changes_read.py --quick          # 100,000 rows
    python tools/bench/changes_read.py --reads-only     # the reads only
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import harness
import msgspec
from changes_latency import reader_process
from raw_readers import RawHTTP, RawPostgres

import refimpl

PAGE_SQL = 50_000
PAGE_HTTP = 10_000
UPSERT = b'"op":"upsert"'
PG_INSERT = b"table public.t: INSERT"
PEEK = "SELECT lsn, xid, data FROM pg_logical_slot_peek_changes('bench', NULL, NULL)"
PEEK_PAGE = "SELECT lsn, xid, data FROM pg_logical_slot_peek_changes('bench', NULL, {page})"


def memory(start: bool = False) -> str:
    """The reader's RSS; at the start of a read the peak starts anew."""
    if start:
        harness.reset_peak_rss()
    current, peak = harness.rss_mb()
    return f"RSS {current:,.0f} MB, peak since the read began {peak:,.0f} MB (ru_maxrss)"


def write_refimpl(folder: Path, rows: int, txn_rows: int) -> tuple[int, float]:
    """Commit the rows with the embedded API; the LSN before them and the seconds taken."""
    with refimpl.connect(folder) as connection:
        connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
        start = connection.instance.database("demo").log.durable_lsn
        session = connection.session()
        began = time.perf_counter()
        for first in range(0, rows, txn_rows):
            batch = [(i, i * 0.5, f"row {i}") for i in range(first, min(rows, first + txn_rows))]
            session.insert_rows("t", ["id", "v", "s"], batch)
        elapsed = time.perf_counter() - began
        session.close()
    return start, elapsed


def read_changes_sql(folder: Path, after: int, expected: int) -> float:
    with refimpl.connect(folder) as connection:
        print(f"  changes(): before reading: {memory(start=True)}")
        count = 0
        began = time.perf_counter()
        while True:
            result = connection.execute(f"SELECT * FROM changes('t', {after}, {PAGE_SQL})")
            if not result.rows:
                break
            count += sum(1 for row in result.rows if row[3] == "upsert")
            after = result.rows[-1][0]
        elapsed = time.perf_counter() - began
        print(f"  changes(): after reading:  {memory()}")
    if count != expected:
        print(f"  warning: changes() gave {count} rows, expected {expected}")
    return count / elapsed


# --- the lean readers -----------------------------------------------------------------------


def _target(page: int, fmt: str, options: dict[str, str] | None) -> str:
    """A page's request target but its position, which is appended to it."""
    query = {"table": "t", "format": fmt, "wait": "0", "limit": str(page), **(options or {})}
    return "/api/changes?" + urlencode(query) + "&from="


class Change(msgspec.Struct):
    """A change as `--decode` reads it: its fields, its row left as JSON text."""

    lsn: int = 0
    seq: int = 0
    committed_at: str | None = None
    op: str = ""
    key: str | None = None
    row: msgspec.Raw = msgspec.Raw(b"null")


class JsonPage(msgspec.Struct):
    changes: list[Change]
    next: int
    more: bool


_decode_page = msgspec.json.Decoder(JsonPage).decode


def read_changes_http(
    server: harness.RefimplServer,
    after: int,
    expected: int,
    page: int = PAGE_HTTP,
    options: dict[str, str] | None = None,
    decode: bool = False,
) -> float:
    """Rows/s reading the feed as JSON in pages of `page` from `after`, the rows counted in
    each body (`decode`: decoded, a struct per change); `options` are further changefeed
    options of each request (`where`, `squash`, `types`: `versions.py`'s shaped read)."""
    client = RawHTTP(server.url, server.headers)
    target = _target(page, "json", options)
    count = 0
    began = time.perf_counter()
    while True:
        body = client.get(target + str(after))
        if decode:
            parsed = _decode_page(body)
            count += sum(1 for c in parsed.changes if c.op == "upsert")
            after, more = parsed.next, parsed.more
        else:
            count += body.count(UPSERT)
            # The answer's fields after `changes` are `next`, `more`, `durable_lsn`,
            # `oldest_lsn`, all numbers or booleans: the last `"next":` is the answer's.
            at = body.rindex(b'"next":') + 7
            after = int(body[at : body.index(b",", at)])
            more = b'"more":true' in body[at:]
        if not more:
            break
    elapsed = time.perf_counter() - began
    client.close()
    if count != expected:
        print(f"  warning: /api/changes gave {count} rows, expected {expected}")
    return count / elapsed


def read_changes_sse(
    server: harness.RefimplServer, after: int, expected: int, page: int = PAGE_HTTP
) -> float:
    """The same pages as server-sent events (format=sse, wait=0): the rows' `change` events
    counted in the bytes, the next page from the `position` event's id."""
    client = RawHTTP(server.url, server.headers)
    target = _target(page, "sse", None)
    count = 0
    began = time.perf_counter()
    while True:
        body = client.get(target + str(after))
        count += body.count(UPSERT)
        position = body.rindex(b"event: position")  # after its `id: <next>` line
        after = int(body[body.rindex(b"id: ", 0, position) + 4 : position].strip())
        if b'"more":true' not in body[position:]:
            break
    elapsed = time.perf_counter() - began
    client.close()
    if count != expected:
        print(f"  warning: /api/changes format=sse gave {count} rows, expected {expected}")
    return count / elapsed


class Peer:
    """The PostgreSQL side: N rows written once, then read again and again by its slot."""

    def __init__(self, pg: harness.Postgres, rows: int, txn_rows: int) -> None:
        self.pg, self.rows = pg, rows
        with pg.connect() as connection:
            connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
            connection.execute(
                "SELECT pg_create_logical_replication_slot('bench', 'test_decoding')"
            )
        began = time.perf_counter()
        with pg.connect(autocommit=False) as connection:
            for first in range(0, rows, txn_rows):
                with connection.cursor() as cursor:
                    with cursor.copy("COPY t (id, v, s) FROM STDIN") as copy:
                        for i in range(first, min(rows, first + txn_rows)):
                            copy.write_row((i, i * 0.5, f"row {i}"))
                connection.commit()
        self.written = time.perf_counter() - began

    def counted(self) -> Reading:
        """The rows counted in the bytes (`RawPostgres`)."""
        client = RawPostgres(self.pg.port)
        reading = Reading.start(client.pid)
        count = client.count(PEEK, PG_INSERT)
        reading = reading.end(count)
        client.close()
        self._check(count, "counted")
        return reading

    def paged(self, page: int) -> Reading:
        """As many rows counted in the bytes, read in pages of `page` changes: the slot's
        first page again and again (see the module's docstring), one query a page."""
        client = RawPostgres(self.pg.port)
        query = PEEK_PAGE.format(page=page)
        reading = Reading.start(client.pid)
        count = 0
        while count < self.rows:
            got = client.count(query, PG_INSERT)
            if not got:
                raise RuntimeError(f"a peek of {page} changes gave no row")
            count += got
        reading = reading.end(count)
        client.close()
        return reading

    def decoded(self) -> Reading:
        """The rows fetched as Python tuples by psycopg (a server-side cursor)."""
        with self.pg.connect(autocommit=False) as connection:
            reading = Reading.start(connection.info.backend_pid)
            count = 0
            with connection.cursor(name="peek") as cursor:
                cursor.itersize = PAGE_SQL
                cursor.execute(PEEK)
                for _lsn, _xid, data in cursor:
                    if data.startswith("table public.t: INSERT"):
                        count += 1
            reading = reading.end(count)
            connection.rollback()
        self._check(count, "decoded")
        return reading

    def _check(self, count: int, how: str) -> None:
        if count != self.rows:
            print(f"  warning: logical decoding ({how}) gave {count} rows, expected {self.rows}")


class Reading(msgspec.Struct):
    """One read: rows/s, the server's and the client's CPU per row in microseconds, and the
    time the server's threads spent runnable but waiting for a core (`runq_us`, per row):
    the load's share of the wall-clock figure, which the server's CPU does not show."""

    rate: float = 0.0
    server_us: float = 0.0
    client_us: float = 0.0
    runq_us: float = 0.0
    pid: int = 0
    began: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    server_runq: float = 0.0

    @classmethod
    def start(cls, pid: int) -> Reading:
        return cls(
            pid=pid,
            began=time.perf_counter(),
            server_cpu=harness.cpu_seconds(pid),
            client_cpu=time.process_time(),
            server_runq=runq_seconds(pid),
        )

    def end(self, rows: int) -> Reading:
        elapsed = time.perf_counter() - self.began
        server = harness.cpu_seconds(self.pid) - self.server_cpu
        client = time.process_time() - self.client_cpu
        runq = runq_seconds(self.pid) - self.server_runq
        per_row = 1e6 / max(rows, 1)
        return Reading(rows / elapsed, server * per_row, client * per_row, runq * per_row)


def runq_seconds(pid: int) -> float:
    """Seconds the threads of process `pid` have spent runnable, waiting for a core (the
    second field of each thread's /proc schedstat); a thread gone since is not counted."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


def read_ours(
    folder: Path,
    start: int,
    rows: int,
    read: Callable[..., float],
    page: int,
    decode: bool,
    code: Path | None = None,
) -> Reading:
    """One read through a fresh server of its own on the data folder (`code`: the server of
    that checkout, `--before`'s)."""
    extra: dict[str, Any] = {"decode": True} if decode else {}
    with harness.RefimplServer(threads=16, data=folder, code=code) as server:
        reading = Reading.start(server.pid)
        rate = read(server, start, rows, page, **extra)
        done = reading.end(rows)
    return Reading(rate, done.server_us, done.client_us, done.runq_us)


# --- commits with waiting readers ------------------------------------------------------------


def commit_rate(
    server: harness.RefimplServer, seconds: float, first_id: int, writers: int = 4
) -> float:
    counts = [0] * writers
    stop_at = time.monotonic() + seconds

    def writer(index: int) -> None:
        client = harness.LeanHTTP(server.url, {**server.headers, "Content-Type": "text/plain"})
        ident = first_id + index * 10_000_000
        while time.monotonic() < stop_at:
            sql = f"INSERT INTO c VALUES ({ident}, {time.monotonic()!r})"
            status, _, body = client.request("POST", "/exec", sql.encode())
            if status != 200:
                raise RuntimeError(f"{status}: {body[:200]!r}")
            ident += 1
            counts[index] += 1
        client.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


def commits_with_readers(seconds: float, readers: int = 100) -> tuple[float, float, int]:
    with harness.RefimplServer(threads=512) as server:
        server.sql("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE)")
        alone = commit_rate(server, seconds, 0)
        start = str(server.stats()["databases"]["demo"]["durable_lsn"])
        target = {"kind": "refimpl", "url": server.url, "token": server.token}
        context = multiprocessing.get_context("fork")
        ready = context.Value("i", 0)
        queue = context.Queue()
        stop_at = time.monotonic() + seconds + 6.0
        procs = 4
        processes = [
            context.Process(
                target=reader_process, args=(target, readers // procs, start, ready, stop_at, queue)
            )
            for _ in range(procs)
        ]
        for process in processes:
            process.start()
        while ready.value < readers // procs * procs:
            time.sleep(0.05)
        time.sleep(2.0)  # every reader has asked and waits
        together = commit_rate(server, seconds, 100_000_000)
        results = [queue.get(timeout=seconds + 120) for _ in processes]
        for process in processes:
            process.join(30)
    events = sum(len(events) for events, _ in results)
    return alone, together, events


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--txn-rows", type=int, default=100, help="rows per transaction")
    parser.add_argument("--seconds", type=float, default=10.0, help="per commit-rate phase")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 4 s phases")
    parser.add_argument(
        "--writers-only",
        action="store_true",
        help="only the commit throughput with and without waiting readers",
    )
    parser.add_argument(
        "--reads-only", action="store_true", help="only the reading figures, no commit throughput"
    )
    parser.add_argument(
        "--pages",
        default="100,1000,10000",
        help="/api/changes page sizes (limit=) to read at, comma-separated",
    )
    parser.add_argument("--rounds", type=int, default=3, help="reads of each kind, alternating")
    parser.add_argument(
        "--decode",
        action="store_true",
        help="JSON pages decoded into an object per change, beside psycopg's tuple per row",
    )
    parser.add_argument(
        "--before",
        default="",
        help="a checkout folder (a git worktree of an earlier commit, say) whose server also"
        " reads each page size in each round, beside this one's and PostgreSQL's",
    )
    args = parser.parse_args()
    rows = 100_000 if args.quick else args.rows
    seconds = 4.0 if args.quick else args.seconds

    if not args.writers_only:
        pages = [int(p) for p in args.pages.split(",")]
        before = Path(args.before).resolve() if args.before else None
        read_figures(rows, args.txn_rows, pages, args.rounds, args.decode, before)
    if not args.reads_only:
        writer_figures(seconds)


PER_ROW_COUNTED = (
    "per row, each client: nothing (rows counted in the received bytes; refimpl: a raw"
    " keep-alive HTTP socket, each body read whole; PostgreSQL: its protocol over a raw"
    " socket, a simple query); changes() and its PostgreSQL read (psycopg): a tuple a row"
)
PER_ROW_OBJECTS = (
    "per row, each client: JSON pages: a struct a change (msgspec; its row kept as JSON"
    " text) against a tuple a row (psycopg, server-side cursor); SSE pages: nothing (rows"
    " counted in the bytes) against nothing (PostgreSQL's protocol over a raw socket)"
)


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _median(readings: list[Reading], field: str) -> float:
    return statistics.median(getattr(r, field) for r in readings)


def pair(
    turn: int,
    ours: dict[str, list[Reading]],
    peer: dict[str, list[Reading]],
    label: str,
    mine: Callable[[], Reading],
    theirs: Callable[[], Reading],
) -> None:
    """One read of each side, in the round's order (which goes first swaps every round)."""
    first, second = (mine, theirs) if turn % 2 == 0 else (theirs, mine)
    a, b = first(), second()
    mine_r, theirs_r = (a, b) if turn % 2 == 0 else (b, a)
    ours.setdefault(label, []).append(mine_r)
    peer.setdefault(label, []).append(theirs_r)
    print(
        f"    {label:36} {mine_r.rate:>10,.0f} rows/s  PostgreSQL"
        f" {theirs_r.rate:>10,.0f}  x{mine_r.rate / theirs_r.rate:.2f}",
        flush=True,
    )


def read_figures(
    rows: int, txn_rows: int, pages: list[int], rounds: int, decode: bool, before: Path | None
) -> None:
    print(f"{rows:,} rows in transactions of {txn_rows} rows; {rounds} rounds; {load()}")
    print(PER_ROW_OBJECTS if decode else PER_ROW_COUNTED)
    reads: list[tuple[str, Callable[..., float], int]] = [
        (form, read, page)
        for page in pages
        for form, read in (("json", read_changes_http), ("sse", read_changes_sse))
    ]
    # (label) -> the rounds' readings: ours and the peer's read beside it.
    ours: dict[str, list[Reading]] = {}
    peer: dict[str, list[Reading]] = {}
    whole: list[Reading] = []  # PostgreSQL's one read of every row, once a round
    earlier: dict[str, list[Reading]] = {}  # (label) -> `before`'s server's readings
    with (
        tempfile.TemporaryDirectory(prefix="kdb-bench-") as name,
        harness.Postgres({"wal_level": "logical", "max_wal_size": "4GB"}) as pg,
    ):
        folder = Path(name)
        start, written = write_refimpl(folder, rows, txn_rows)
        print(f"  refimpl (embedded): written in {written:.1f} s ({rows / written:,.0f} rows/s)")
        postgres = Peer(pg, rows, txn_rows)
        print(f"  PostgreSQL: written in {postgres.written:.1f} s")
        for turn in range(rounds):
            print(f"  round {turn + 1}: {load()}", flush=True)

            pair(
                turn,
                ours,
                peer,
                "changes() embedded (objects)",
                lambda: Reading(read_changes_sql(folder, start, rows)),
                postgres.decoded,
            )
            whole.append(postgres.counted())
            print(f"    {'PostgreSQL, all rows in one peek':36} {whole[-1].rate:>10,.0f} rows/s")
            for form, read, page in reads:
                objects = decode and form == "json"
                label = f"/api/changes {form} limit={page}" + (" (objects)" if objects else "")
                # `before`'s read goes first in one round, after the pair in the next.
                if before is not None and turn % 2:
                    earlier.setdefault(label, []).append(
                        read_ours(folder, start, rows, read, page, objects, before)
                    )
                pair(
                    turn,
                    ours,
                    peer,
                    label,
                    functools.partial(read_ours, folder, start, rows, read, page, objects),
                    postgres.decoded if objects else functools.partial(postgres.paged, page),
                )
                if before is not None and not turn % 2:
                    earlier.setdefault(label, []).append(
                        read_ours(folder, start, rows, read, page, objects, before)
                    )
                if before is not None:
                    then = earlier[label][-1]
                    print(f"    {'  before (' + before.name + ')':36} {then.rate:>10,.0f} rows/s")
    print()
    table = []
    checks = []
    one_read = _median(whole, "rate")
    for label, mine in ours.items():
        theirs = peer[label]
        ratios = [m.rate / t.rate for m, t in zip(mine, theirs, strict=True)]
        ratio = statistics.median(ratios)
        rate, peer_rate = _median(mine, "rate"), _median(theirs, "rate")
        server, peer_server = _median(mine, "server_us"), _median(theirs, "server_us")
        embedded = label.startswith("changes()")
        # Clock ticks (10 ms): a short read may take none of the peer's.
        cpu_ratio = float("nan") if embedded or not peer_server else server / peer_server
        table.append(
            (
                label,
                rate,
                peer_rate,
                ratio,
                f"{min(ratios):.2f}-{max(ratios):.2f}",
                float("nan") if embedded else server,
                peer_server,
                cpu_ratio,
                float("nan") if embedded else _median(mine, "client_us"),
                _median(theirs, "client_us"),
                float("nan") if embedded else _median(mine, "runq_us"),
                _median(theirs, "runq_us"),
                float("nan") if embedded else rate / one_read,
            )
        )
        target = 0.5 if embedded else 1.2
        checks.append(
            harness.Check(
                f"{label} rows/s / PostgreSQL",
                ratio,
                f">= {target}x",
                ratio >= target,
                ours=rate,
                peer=peer_rate,
            )
        )
        if not embedded:
            checks.append(
                harness.Check(
                    f"{label} server CPU/row / PostgreSQL backend's",
                    cpu_ratio,
                    ours=server,
                    peer=peer_server,
                )
            )
            checks.append(
                harness.Check(
                    f"{label} rows/s / PostgreSQL's one peek of all rows",
                    rate / one_read,
                    ours=rate,
                    peer=one_read,
                )
            )
    harness.print_table(
        (
            "reader (medians of the rounds)",
            "rows/s",
            "PG rows/s",
            "x PG",
            "range",
            "server us/row",
            "PG backend us/row",
            "CPU/row x PG",
            "client us/row",
            "PG client us/row",
            "runq us/row",
            "PG runq us/row",
            "x PG one peek",
        ),
        table,
        title=f"reading {rows:,} logged changes, {rounds} rounds; at the end: {load()}",
    )
    if before is not None:
        print_before(ours, peer, earlier, before)
    harness.print_checks(checks)


def print_before(
    ours: dict[str, list[Reading]],
    peer: dict[str, list[Reading]],
    earlier: dict[str, list[Reading]],
    before: Path,
) -> None:
    """This code's reads beside `before`'s, round by round: medians, and the median of the
    rounds' own ratios (the two read the same rows in the same round, one after the
    other)."""
    table = []
    for label, then in earlier.items():
        now, theirs = ours[label], peer[label]
        ratios = [n.rate / t.rate for n, t in zip(now, then, strict=True)]
        cpu = [n.server_us / t.server_us for n, t in zip(now, then, strict=True) if t.server_us]
        table.append(
            (
                label,
                _median(now, "rate"),
                _median(then, "rate"),
                statistics.median(ratios),
                f"{min(ratios):.2f}-{max(ratios):.2f}",
                _median(now, "server_us"),
                _median(then, "server_us"),
                statistics.median(cpu) if cpu else float("nan"),
                statistics.median(n.rate / t.rate for n, t in zip(now, theirs, strict=True)),
                statistics.median(b.rate / t.rate for b, t in zip(then, theirs, strict=True)),
            )
        )
    harness.print_table(
        (
            "reader (medians of the rounds)",
            "rows/s",
            "before rows/s",
            "x before",
            "range",
            "server us/row",
            "before us/row",
            "CPU x before",
            "x PG",
            "before x PG",
        ),
        table,
        title=f"this code beside {before.name}'s, same rounds; at the end: {load()}",
    )


def writer_figures(seconds: float) -> None:
    alone, together, events = commits_with_readers(seconds)
    harness.print_table(
        ("single-row commits via /exec, 4 writers", "commits/s"),
        [("no reader", alone), ("100 SSE readers waiting", together)],
        title=f"commit throughput, {seconds:g} s per phase (server --threads 512);"
        f" readers received {events:,} events",
    )
    ratio = together / alone
    harness.print_checks(
        [harness.Check("with 100 waiting readers / with none", ratio, ">= 0.5x", ratio >= 0.5)]
    )


if __name__ == "__main__":
    main()
