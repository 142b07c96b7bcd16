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
import tempfile
from collections.abc import Callable
from pathlib import Path

import harness
from changes_read_ours import (
    read_changes_http,
    read_changes_sql,
    read_changes_sse,
    read_ours,
    write_refimpl,
)
from changes_read_peer import Peer
from changes_read_report import load, print_before, print_reads
from changes_read_writers import writer_figures
from changes_reading import Reading


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
    checks = print_reads(ours, peer, whole, rows, rounds)
    if before is not None:
        print_before(ours, peer, earlier, before)
    harness.print_checks(checks)


if __name__ == "__main__":
    main()
