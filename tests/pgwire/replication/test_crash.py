"""kill -9 of the server while replication clients stream and confirm: after the restart
each resumes from its slot's durable confirmed position, and what it received up to that
position plus what it receives after equals the log exactly once (no change lost, none
twice). Bounded: a few hundred one-row transactions, a kill after about a second."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import requests

from tests.http.conftest import Server, start_server
from tests.pgwire.conftest import PgServer, pg_address

CLIENTS = 2
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


def test_clients_resume_exactly_once_after_a_kill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, "--pg-port", "0")
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
        clients = [_Client(pg, slot) for slot in slots]
        for client in clients:
            client.thread.start()
        written = 0
        started = time.monotonic()
        while time.monotonic() - started < 1.0 or written < 50:
            server.sql(f"INSERT INTO t VALUES ({written})")
            written += 1
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
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)

    server = start_server(data, "--pg-port", "0")
    if not server.token:  # a restart does not print the admin token again
        server = dataclasses.replace(server, token=(data / "admin.token").read_text().strip())
    try:
        pg = _pg(server)
        durable = [row[0] for row in server.sql("SELECT id FROM t ORDER BY id")["dataset"]]
        assert len(durable) >= 50
        slot_rows = server.sql(
            "SELECT slot_name, confirmed_flush_lsn FROM pg_replication_slots ORDER BY slot_name"
        )["dataset"]
        confirmed = {name: _position(text) for name, text in slot_rows}
        for client in clients:
            cut = confirmed[client.slot]
            # The durable position is one the client confirmed (or where the slot began).
            assert cut in client.confirmed or not client.confirmed or cut < client.confirmed[0]
            before = client.rows(through=cut)
            resumed = _Client(pg, client.slot)
            resumed.thread.start()
            deadline = time.monotonic() + 20
            while len(before) + len(resumed.rows()) < len(durable) and time.monotonic() < deadline:
                time.sleep(0.05)
            resumed.stop.set()
            resumed.thread.join(10)
            # Nothing at or before the cut comes again (a Begin it cut through may).
            assert all(at > cut for at, text in resumed.received if "INSERT" in text)
            assert resumed.rows(), "the client had an unconfirmed tail to receive again"
            assert sorted(before + resumed.rows()) == durable, client.slot
    finally:
        assert server.stop() == 0


def _position(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)
