"""Logical replication: rows per second streamed to pg_recvlogical with pgoutput, and
commit-to-receipt latency, against PostgreSQL's own logical decoding, in one run.

1. Throughput. N rows (--rows, default 200,000) of `t (id INT PRIMARY KEY, v TEXT,
   x DOUBLE)` are committed in transactions of --txn-rows rows after a pgoutput slot was
   made, with a publication of `t`; then `pg_recvlogical --start --endpos <position>` (the
   PostgreSQL client, unmodified) streams them to /dev/null with `proto_version=1`, timed
   from its start to its exit. The same on a throwaway PostgreSQL (wal_level=logical).
2. Latency. A psycopg2 replication client streams pgoutput while a writer commits one-row
   INSERTs through the PostgreSQL protocol (psycopg, autocommit) at --rate per second for
   --seconds; a row's latency is from just before its INSERT is sent to the moment the
   client has read its Insert message. p50 and p99 of both servers.

Targets (issue 35): rows/s at least 0.5x PostgreSQL's; p99 at most PostgreSQL's + 10 ms.

    python tools/bench/replication.py            # 200,000 rows, ~2 minutes
    python tools/bench/replication.py --quick    # 50,000 rows, 5 s of commits
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import threading
import time
from typing import Any

import harness  # before anything imports `http` (see harness)
import psycopg
import psycopg2
import psycopg2.extras

RECVLOGICAL = shutil.which("pg_recvlogical") or "/usr/bin/pg_recvlogical"


class Target:
    """Where a server takes PostgreSQL connections, and how to log in."""

    def __init__(self, host: str, port: int, user: str, password: str, dbname: str) -> None:
        self.host, self.port, self.user, self.password, self.dbname = (
            host, port, user, password, dbname,
        )  # fmt: skip

    def conninfo(self) -> str:
        password = f" password={self.password}" if self.password else ""
        return (
            f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}"
            f"{password} connect_timeout=10"
        )

    def replication(self) -> Any:
        return psycopg2.connect(
            self.conninfo(), connection_factory=psycopg2.extras.LogicalReplicationConnection
        )

    def recvlogical(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PGPASSWORD": self.password}
        command = [RECVLOGICAL, "-h", self.host, "-p", str(self.port), "-U", self.user,
                   "-d", self.dbname, *args]  # fmt: skip
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)


def prepare(target: Target, rows: int, txn_rows: int, pg_types: bool) -> str:
    """Table, publication and slot; N rows committed; the position to stream to."""
    text, double = ("TEXT", "DOUBLE PRECISION") if pg_types else ("STRING", "DOUBLE")
    with psycopg.connect(target.conninfo(), autocommit=True) as connection:
        connection.execute(f"CREATE TABLE t (id INT PRIMARY KEY, v {text}, x {double})")
        connection.execute("CREATE TABLE lat (id INT PRIMARY KEY, v " + text + ")")
        connection.execute("CREATE PUBLICATION bench_pub FOR TABLE t")
        connection.execute("CREATE PUBLICATION lat_pub FOR TABLE lat")
    made = target.recvlogical("--slot", "bench", "--create-slot", "-P", "pgoutput")
    if made.returncode:
        raise RuntimeError(made.stderr)
    with psycopg.connect(target.conninfo()) as connection:
        for start in range(0, rows, txn_rows):
            with connection.cursor() as cursor:
                with cursor.copy("COPY t (id, v, x) FROM STDIN") as copy:
                    for i in range(start, min(rows, start + txn_rows)):
                        copy.write_row((i, f"row {i}", i * 0.25))
            connection.commit()
    with psycopg.connect(target.conninfo(), autocommit=True) as connection:
        row = connection.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        return str(row[0])


def stream_all(target: Target, end: str) -> float:
    """Seconds pg_recvlogical takes to stream the slot up to `end`."""
    started = time.perf_counter()
    done = target.recvlogical(
        "--slot", "bench", "--start", "--endpos", end, "--no-loop", "-f", "/dev/null",
        "-o", "proto_version=1", "-o", "publication_names=bench_pub",
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(done.stderr)
    return elapsed


def latency(target: Target, rate: float, seconds: float) -> list[float]:
    """Commit-to-receipt latencies in milliseconds."""
    connection = target.replication()
    cursor: Any = connection.cursor()
    cursor.create_replication_slot("lat_slot", output_plugin="pgoutput")
    cursor.start_replication(
        slot_name="lat_slot", decode=False,
        options={"proto_version": "1", "publication_names": "lat_pub"},
    )  # fmt: skip
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    count = int(rate * seconds)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            message = cursor.read_message()
            if message is None:
                time.sleep(0.0002)
                continue
            now = time.perf_counter()
            payload = message.payload
            if payload[:1] == b"I":
                # I, relation OID, N, column count, t, length, the id's text
                size = struct.unpack_from("!i", payload, 9)[0]
                received[int(payload[13 : 13 + size])] = now
            cursor.send_feedback(flush_lsn=message.data_start)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with psycopg.connect(target.conninfo(), autocommit=True) as writer:
        started = time.perf_counter()
        for i in range(count):
            pause = started + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            sent[i] = time.perf_counter()
            writer.execute("INSERT INTO lat VALUES (%s, 'x')", (i,))
    deadline = time.monotonic() + 30
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    reader.join(5)
    connection.close()
    if len(received) < count:
        print(f"  warning: {len(received)} of {count} rows received")
    return [(received[i] - sent[i]) * 1000 for i in sorted(received)]


def measure(target: Target, args: argparse.Namespace, pg_types: bool) -> dict[str, float]:
    end = prepare(target, args.rows, args.txn_rows, pg_types)
    seconds = stream_all(target, end)
    samples = latency(target, args.rate, args.seconds)
    figures = harness.summary(samples)
    return {"rate": args.rows / seconds, "seconds": seconds, **figures}


def refimpl_target(server: harness.RefimplServer) -> Target:
    line = next(x for x in server.output if x.startswith("postgres on "))
    host, _, port = line.removeprefix("postgres on ").strip().rpartition(":")
    return Target(host, int(port), "admin", server.token, "demo")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="commits/s of the latency run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency run")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.seconds = 50_000, 5.0

    with harness.RefimplServer(extra=["--pg-port", "0"]) as server:
        ours = measure(refimpl_target(server), args, pg_types=False)
    with harness.Postgres({"wal_level": "logical", "max_wal_senders": "10"}) as pg:
        theirs = measure(Target("127.0.0.1", pg.port, "postgres", "", "postgres"), args, True)

    harness.print_table(
        ["measure", "refimpl", "PostgreSQL 15", "ratio", "target"],
        [
            (
                "rows/s to pg_recvlogical (pgoutput)",
                ours["rate"],
                theirs["rate"],
                ours["rate"] / theirs["rate"],
                ">= 0.5",
            ),
            (
                "commit-to-receipt p50 ms",
                ours["p50"],
                theirs["p50"],
                ours["p50"] - theirs["p50"],
                "",
            ),
            (
                "commit-to-receipt p99 ms",
                ours["p99"],
                theirs["p99"],
                ours["p99"] - theirs["p99"],
                "<= +10 ms",
            ),
        ],  # fmt: skip
        title=f"logical replication: {args.rows} rows in transactions of {args.txn_rows};"
        f" {int(args.rate * args.seconds)} one-row commits at {args.rate:g}/s",
    )
    rate_ratio = ours["rate"] / theirs["rate"]
    p99_over = ours["p99"] - theirs["p99"]
    harness.print_checks(
        [
            harness.Check(
                "rows/s to pg_recvlogical (pgoutput) / PostgreSQL's",
                rate_ratio,
                ">= 0.5x",
                rate_ratio >= 0.5,
                ours=ours["rate"],
                peer=theirs["rate"],
            ),
            harness.Check(
                "commit-to-receipt p99, ms over PostgreSQL's",
                p99_over,
                "<= +10 ms",
                p99_over <= 10,
                ours=ours["p99"],
                peer=theirs["p99"],
            ),
        ]
    )


if __name__ == "__main__":
    main()
