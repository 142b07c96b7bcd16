"""Reading the change stream: rows per second through changes() and /api/changes, against
PostgreSQL logical decoding, in one run; then commit throughput with 100 waiting readers.

1. N rows (--rows, default 1,000,000) are committed into `t (id BIGINT PRIMARY KEY, v DOUBLE,
   s STRING)` in transactions of --txn-rows rows, with the embedded API.
2. They are read back in pages with `SELECT * FROM changes('t', after, 50000)` (embedded),
   each page going on from the last LSN of the one before.
3. A `refimpl serve` on the same data folder; the same rows read in pages through
   GET /api/changes?table=t&format=json&limit=<page>&from=<next> (each page parsed with
   msgspec, in C as psycopg reads PostgreSQL's rows: the reader shares the cores with the
   server), then as server-sent events (`format=sse&wait=0`, the rows counted in the bytes).
4. PostgreSQL (wal_level=logical): a test_decoding slot is created, then the same N rows are
   committed in transactions of the same size (COPY), then decoded with
   `pg_logical_slot_peek_changes` (fetched through a server-side cursor, 50,000 at a time).

The server's CPU per row read (/proc/<pid>/stat over each read) is printed beside the rates:
it depends little on what else runs on the machine. The reading process's memory is printed
at the start and the end of each read (current RSS from /proc/self/statm, peak RSS from
resource.getrusage): flat figures show that a reader does not accumulate what it read.

5. Single-row commits through /exec (4 writer threads, --seconds) with no reader, then with
   100 readers (4 processes of 25 threads) waiting on /api/changes and woken by every commit.

The /api/changes reads are made at each page size of --pages (default 100, 1,000 and 10,000
rows a request), JSON and SSE, each by a fresh server.

Targets: changes() rows/s >= 0.5x PostgreSQL's; /api/changes (JSON and SSE, at each page size)
>= 1.2x; commit throughput with 100 waiting readers >= 0.5x that with none.

    python tools/bench/changes_read.py                  # full: 1,000,000 rows, ~10 minutes
    python tools/bench/changes_read.py --quick          # 100,000 rows
    python tools/bench/changes_read.py --reads-only     # steps 1-4 only
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import threading
import time
from pathlib import Path

import harness
import msgspec
import requests
from changes_latency import reader_process

import refimpl

PAGE_SQL = 50_000
PAGE_HTTP = 10_000


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


def read_changes_http(
    server: harness.RefimplServer,
    after: int,
    expected: int,
    page: int = PAGE_HTTP,
    options: dict[str, str] | None = None,
) -> float:
    """Rows/s reading the feed in pages of `page` from `after`; `options` are further
    changefeed options of each request (`where`, `squash`, `types`: `versions.py`'s shaped
    read)."""
    session = requests.Session()
    print(f"  /api/changes: before reading: {memory(start=True)}")
    count = 0
    began = time.perf_counter()
    while True:
        response = session.get(
            f"{server.url}/api/changes",
            params={
                "table": "t",
                "format": "json",
                "limit": str(page),
                "from": str(after),
                **(options or {}),
            },
            headers=server.headers,
            timeout=600,
        )
        response.raise_for_status()
        body = msgspec.json.decode(response.content)  # in C, as psycopg reads its rows
        changes = body["changes"]
        if not changes:
            break
        count += sum(1 for c in changes if c["op"] == "upsert")
        after = body["next"]
    elapsed = time.perf_counter() - began
    print(f"  /api/changes: after reading:  {memory()}")
    if count != expected:
        print(f"  warning: /api/changes gave {count} rows, expected {expected}")
    return count / elapsed


def read_changes_sse(
    server: harness.RefimplServer, after: int, expected: int, page: int = PAGE_HTTP
) -> float:
    """The same pages as server-sent events (format=sse, wait=0): the rows' `change` events
    counted, the next page from the `position` event's id."""
    session = requests.Session()
    count = 0
    began = time.perf_counter()
    while True:
        response = session.get(
            f"{server.url}/api/changes",
            params={
                "table": "t",
                "format": "sse",
                "wait": "0",
                "limit": str(page),
                "from": str(after),
            },
            headers=server.headers,
            timeout=600,
        )
        response.raise_for_status()
        text = response.content
        rows = text.count(b'"op":"upsert"')
        count += rows
        position = text.rindex(b"event: position")  # after its `id: <next>` line
        after = int(text[text.rindex(b"id: ", 0, position) + 4 : position].strip())
        if b'"more":true' not in text[position:]:
            break
    elapsed = time.perf_counter() - began
    if count != expected:
        print(f"  warning: /api/changes format=sse gave {count} rows, expected {expected}")
    return count / elapsed


def postgres_decoding(rows: int, txn_rows: int) -> tuple[float, float]:
    """(rows/s decoded, seconds to write) with a test_decoding slot made before the writes."""
    with harness.Postgres({"wal_level": "logical", "max_wal_size": "4GB"}) as pg:
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
        written = time.perf_counter() - began
        with pg.connect(autocommit=False) as connection:
            print(f"  logical decoding: before reading: {memory(start=True)}")
            count = 0
            began = time.perf_counter()
            with connection.cursor(name="peek") as cursor:
                cursor.itersize = PAGE_SQL
                cursor.execute(
                    "SELECT lsn, xid, data FROM pg_logical_slot_peek_changes('bench', NULL, NULL)"
                )
                for _lsn, _xid, data in cursor:
                    if data.startswith("table public.t: INSERT"):
                        count += 1
            elapsed = time.perf_counter() - began
            print(f"  logical decoding: after reading:  {memory()}")
            connection.rollback()
            connection.execute("SELECT pg_drop_replication_slot('bench')")
            connection.commit()
    if count != rows:
        print(f"  warning: logical decoding gave {count} rows, expected {rows}")
    return count / elapsed, written


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
    args = parser.parse_args()
    rows = 100_000 if args.quick else args.rows
    seconds = 4.0 if args.quick else args.seconds

    if not args.writers_only:
        read_figures(rows, args.txn_rows, [int(p) for p in args.pages.split(",")])
    if not args.reads_only:
        writer_figures(seconds)


def read_figures(rows: int, txn_rows: int, pages: list[int]) -> None:
    print(f"{rows:,} rows in transactions of {txn_rows} rows")
    http: dict[tuple[str, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kdb-bench-") as name:
        folder = Path(name)
        start, written = write_refimpl(folder, rows, txn_rows)
        print(f"  refimpl (embedded): written in {written:.1f} s ({rows / written:,.0f} rows/s)")
        sql_rate = read_changes_sql(folder, start, rows)
        for page in pages:
            for form, read in (("JSON", read_changes_http), ("SSE", read_changes_sse)):
                # A server of its own for each read: a page read before is answered from
                # the server's shared answers, which a first reader does not find.
                with harness.RefimplServer(threads=16, data=folder) as server:
                    cpu = harness.cpu_seconds(server.pid)
                    rate = read(server, start, rows, page)
                    http[(form, page)] = (
                        rate,
                        (harness.cpu_seconds(server.pid) - cpu) / rows * 1e6,
                    )
    pg_rate, pg_written = postgres_decoding(rows, txn_rows)
    print(f"  PostgreSQL: written in {pg_written:.1f} s ({rows / pg_written:,.0f} rows/s)")
    print()
    harness.print_table(
        ("reader", "rows/s", "x PostgreSQL", "server CPU us/row"),
        [
            (f"changes('t', after, {PAGE_SQL}) embedded", sql_rate, sql_rate / pg_rate, ""),
            *(
                (f"/api/changes format={form.lower()} limit={page}", rate, rate / pg_rate, cpu)
                for (form, page), (rate, cpu) in http.items()
            ),
            ("PostgreSQL pg_logical_slot_peek_changes", pg_rate, 1.0, ""),
        ],
        title=f"reading {rows:,} logged changes",
    )
    ratio = sql_rate / pg_rate
    harness.print_checks(
        [
            harness.Check(
                "changes() rows/s / PostgreSQL logical decoding",
                ratio,
                ">= 0.5x",
                ratio >= 0.5,
                ours=sql_rate,
                peer=pg_rate,
            ),
            *(
                harness.Check(
                    f"/api/changes {form} limit={page} rows/s / PostgreSQL",
                    rate / pg_rate,
                    ">= 1.2x",
                    rate >= 1.2 * pg_rate,
                    ours=rate,
                    peer=pg_rate,
                )
                for (form, page), (rate, _cpu) in http.items()
            ),
        ]
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
