"""kill -9 of the server while three replication clients of two kinds stream and confirm:
two psycopg2 replication connections and `pg_recvlogical` (PostgreSQL's client program,
writing test_decoding into a file, fsyncing and confirming every second, and left running
across the kill: it reconnects by itself). After the restart each resumes from its slot's
durable confirmed position, and what it received up to that position plus what it receives
after equals the log exactly once (no change lost, none twice). Bounded: a few hundred
one-row transactions, a kill after about three seconds."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import pytest
import requests

from tests.http.conftest import Server, start_server
from tests.pgwire.conftest import PgServer, pg_address
from tests.pgwire.replication.conftest import RECVLOGICAL, recvlogical

CLIENTS = 2  # psycopg2 ones; pg_recvlogical is the third
RECVLOGICAL_SLOT = "crash_rl"
# Bounds the whole test: at most this many writes over this long before the kill.
WRITE_SECONDS = 3.0
WRITES = 300
FINAL_WRITES = 20  # after the restart, so every client has something to resume to
FINAL_BASE = 1_000_000  # their ids: above any the writer that races the kill can reach
CONFIRM_EVERY = 7  # messages between two confirmations
# A client confirms what it received this many messages before: as one that applies what
# it receives slowly, it always has an unconfirmed tail when the server dies.
CONFIRM_LAG = 30


class _Client:
    """A replication client on a thread: keeps every (position, text) it received and the
    positions it confirmed; stops when the server goes away or `stop` is set."""

    def __init__(self, pg: PgServer, slot: str) -> None:
        self.pg, self.slot = pg, slot
        self.received: list[tuple[int, str]] = []
        self.confirmed: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            connection = psycopg2.connect(
                host=self.pg.host, port=self.pg.port, user="admin", password=self.pg.token,
                dbname="demo", connection_factory=psycopg2.extras.LogicalReplicationConnection,
            )  # fmt: skip
            cursor: Any = connection.cursor()
            cursor.start_replication(
                slot_name=self.slot, decode=True, options={"include-xids": "0"}
            )
            while not self.stop.is_set():
                message = cursor.read_message()
                if message is None:
                    time.sleep(0.002)
                    continue
                self.received.append((message.data_start, message.payload))
                count = len(self.received)
                if count % CONFIRM_EVERY == 0 and count > CONFIRM_LAG:
                    applied = self.received[count - CONFIRM_LAG - 1][0]
                    cursor.send_feedback(flush_lsn=applied, force=True)
                    self.confirmed.append(applied)
            connection.close()
        except psycopg2.Error:
            pass  # the server was killed: what was received so far is kept

    def rows(self, after: int = -1, through: int | None = None) -> list[int]:
        """The ids of the inserts received with a position in (after, through]."""
        return [
            int(text.split("id[integer]:")[1])
            for at, text in self.received
            if "INSERT" in text and at > after and (through is None or at <= through)
        ]


def _pg(server: Server) -> PgServer:
    return PgServer(server, *pg_address(server))


def _free_port() -> int:
    """A loopback port free now: the restarted server must listen where pg_recvlogical,
    which outlives the kill, reconnects."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _RecvLogical:
    """pg_recvlogical streaming the slot into a file, as a process that outlives the kill;
    `-F 1 -s 1`: it fsyncs and confirms what it fsynced every second."""

    def __init__(self, pg: PgServer, folder: Path) -> None:
        self.output = folder / "recvlogical.out"
        self.errors = folder / "recvlogical.err"
        self.process = subprocess.Popen(
            [
                RECVLOGICAL, "-h", pg.host, "-p", str(pg.port), "-U", "admin", "-d", "demo",
                "--slot", RECVLOGICAL_SLOT, "--start", "-f", str(self.output),
                "--fsync-interval", "1", "--status-interval", "1", "-v",
            ],
            env={**os.environ, "PGPASSWORD": pg.token, "PGCONNECT_TIMEOUT": "5"},
            stdout=subprocess.DEVNULL,
            stderr=self.errors.open("wb"),
        )  # fmt: skip

    def wait_disconnected(self) -> None:
        """Until it says it lost the server (so it has written all it received)."""
        deadline = time.monotonic() + 20
        while "disconnected" not in self.errors.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "disconnected" in self.errors.read_text(), self.errors.read_text()

    def log_before_kill(self) -> str:
        """Its verbose log up to its first disconnection (the kill)."""
        return self.errors.read_text().partition("disconnected")[0]

    def log_after_kill(self) -> str:
        """Its verbose log after its first disconnection: its reconnections."""
        return self.errors.read_text().partition("disconnected")[2]

    def size(self) -> int:
        return self.output.stat().st_size if self.output.exists() else 0

    def rows(self, start: int = 0, end: int | None = None) -> list[int]:
        """The ids of the inserts it wrote in bytes [start, end) of its file."""
        text = self.output.read_bytes()[start:end].decode()
        return [
            int(line.split("id[integer]:")[1])
            for line in text.splitlines()
            if line.startswith("table public.t: INSERT:")
        ]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            self.process.wait(10)


def test_clients_resume_exactly_once_after_a_kill(tmp_path: Path) -> None:
    if not Path(RECVLOGICAL).exists():
        pytest.skip("pg_recvlogical is not installed (PostgreSQL's client package)")
    data = tmp_path / "data"
    pg_port = str(_free_port())
    server = start_server(data, "--pg-port", pg_port)
    receiver: _RecvLogical | None = None
    try:
        try:
            pg = _pg(server)
            server.sql("CREATE TABLE t (id INT PRIMARY KEY)")
            slots = [f"crash_{n}" for n in range(CLIENTS)]
            for slot in slots:
                connection = psycopg2.connect(
                    host=pg.host, port=pg.port, user="admin", password=pg.token, dbname="demo",
                    connection_factory=psycopg2.extras.LogicalReplicationConnection,
                )  # fmt: skip
                connection.cursor().create_replication_slot(slot, output_plugin="test_decoding")
                connection.close()
            made = recvlogical(
                pg, "demo", "--slot", RECVLOGICAL_SLOT, "--create-slot", "-P", "test_decoding"
            )
            assert made.returncode == 0, made.stderr
            clients = [_Client(pg, slot) for slot in slots]
            for client in clients:
                client.thread.start()
            receiver = _RecvLogical(pg, tmp_path)
            written = 0
            started = time.monotonic()
            while time.monotonic() - started < WRITE_SECONDS or written < 50:
                server.sql(f"INSERT INTO t VALUES ({written})")
                written += 1
                # Paced, so the writes span the seconds pg_recvlogical needs to confirm.
                time.sleep(max(0.0, started + written * WRITE_SECONDS / WRITES - time.monotonic()))
            # Writes go on while the server dies: some are acknowledged, some not.
            writer_stop = threading.Event()

            def write_on() -> None:
                n = written
                while not writer_stop.is_set():
                    try:
                        requests.post(
                            f"{server.url}/exec",
                            data=f"INSERT INTO t VALUES ({n})",
                            headers={"Authorization": f"Bearer {server.token}"},
                            timeout=2,
                        )
                    except requests.RequestException:
                        return
                    n += 1

            writer = threading.Thread(target=write_on, daemon=True)
            writer.start()
            time.sleep(0.2)
            server.stop(signal.SIGKILL)
            writer_stop.set()
            writer.join(5)
            for client in clients:
                client.stop.set()
                client.thread.join(10)
            # pg_recvlogical stays alive but is held still across the restart, so the slot's
            # position read right after it is the one made durable before the kill, not one
            # its reconnection confirms.
            receiver.wait_disconnected()
            receiver.process.send_signal(signal.SIGSTOP)
            received_before = receiver.size()
        finally:
            if server.process.poll() is None:
                server.stop(signal.SIGKILL)

        server = start_server(data, "--pg-port", pg_port)
        if not server.token:  # a restart does not print the admin token again
            server = dataclasses.replace(server, token=(data / "admin.token").read_text().strip())
        try:
            pg = _pg(server)
            slot_rows = server.sql(
                "SELECT slot_name, confirmed_flush_lsn FROM pg_replication_slots ORDER BY slot_name"
            )["dataset"]
            confirmed = {name: _position(text) for name, text in slot_rows}
            receiver.process.send_signal(signal.SIGCONT)
            for n in range(FINAL_WRITES):
                server.sql(f"INSERT INTO t VALUES ({FINAL_BASE + n})")
            durable = [row[0] for row in server.sql("SELECT id FROM t ORDER BY id")["dataset"]]
            assert len(durable) >= 50 + FINAL_WRITES
            for client in clients:
                cut = confirmed[client.slot]
                # The durable position is one the client confirmed (or where the slot began).
                assert cut in client.confirmed or not client.confirmed or cut < client.confirmed[0]
                before = client.rows(through=cut)
                resumed = _Client(pg, client.slot)
                resumed.thread.start()
                deadline = time.monotonic() + 20
                while (
                    len(before) + len(resumed.rows()) < len(durable) and time.monotonic() < deadline
                ):
                    time.sleep(0.05)
                resumed.stop.set()
                resumed.thread.join(10)
                # Nothing at or before the cut comes again (a Begin it cut through may).
                assert all(at > cut for at, text in resumed.received if "INSERT" in text)
                assert resumed.rows(), "the client had an unconfirmed tail to receive again"
                assert sorted(before + resumed.rows()) == durable, client.slot
            _check_recvlogical(
                server, receiver, received_before, confirmed[RECVLOGICAL_SLOT], durable
            )
        finally:
            assert server.stop() == 0
    finally:
        if receiver is not None:
            receiver.close()


def _check_recvlogical(
    server: Server, receiver: _RecvLogical, received_before: int, durable_cut: int, rows: list[int]
) -> None:
    """What pg_recvlogical wrote before the kill, cut where the restarted server resumed it,
    plus what it wrote after it reconnected by itself, is the log's rows exactly once."""
    # A change's replication position is its transaction's LSN * 4096 plus its place from 1
    # (`seq + 1`; spec/replication.md), the position a client confirms it by.
    position = {
        ident: lsn * 4096 + seq + 1
        for lsn, seq, ident in server.sql(
            "SELECT lsn, seq, id FROM changes('t') WHERE op = 'upsert'"
        )["dataset"]
    }
    deadline = time.monotonic() + 20
    while "starting log streaming" not in receiver.log_after_kill() and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    # Its confirmations before the kill, as (written, flushed) positions.
    confirmations = [
        (_position(write), _position(flush))
        for write, flush in re.findall(
            r"confirming write up to (\S+), flush to (\S+)", receiver.log_before_kill()
        )
    ]
    flushed = [flush for _write, flush in confirmations]
    assert durable_cut in flushed, (durable_cut, confirmations[-3:])  # one it confirmed
    # It asks to resume from what it last reported, which a confirmation in flight at the
    # kill (or its written position) may put past the durable one; the server resumes from
    # the later of the two.
    requested = re.findall(r"starting log streaming at (\S+)", receiver.log_after_kill())
    assert requested, receiver.log_after_kill()
    cut = max(durable_cut, _position(requested[0]))
    assert cut in confirmations[-1], (cut, confirmations[-3:])
    written_before = receiver.rows(0, received_before)
    before = [ident for ident in written_before if position[ident] <= cut]
    assert before, "pg_recvlogical confirmed nothing before the kill"
    while len(before) + len(receiver.rows(received_before)) < len(rows) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    after = receiver.rows(received_before)
    # Nothing at or before the cut comes again.
    assert all(position[ident] > cut for ident in after), cut
    assert sorted(before + after) == rows, receiver.errors.read_text()[-2000:]


def _position(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)
