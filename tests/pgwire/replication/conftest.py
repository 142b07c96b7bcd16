"""Logical replication against a real server (`--pg-port 0`), by real clients:
`pg_recvlogical` (PostgreSQL's client package) and psycopg2's replication connection."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from tests.pgwire.conftest import PgServer

RECVLOGICAL = shutil.which("pg_recvlogical") or "/usr/bin/pg_recvlogical"


def recvlogical(
    pg: PgServer,
    db: str,
    *args: str,
    timeout: float = 30,
    password: str | None = None,
    user: str = "admin",
) -> subprocess.CompletedProcess[str]:
    """Run pg_recvlogical against the server's database `db`; its output as text."""
    if not Path(RECVLOGICAL).exists():
        pytest.skip("pg_recvlogical is not installed (PostgreSQL's client package)")
    env = {
        **os.environ,
        "PGPASSWORD": pg.token if password is None else password,
        "PGCONNECT_TIMEOUT": "10",
    }
    command: Sequence[str] = [
        RECVLOGICAL,
        "-h",
        pg.host,
        "-p",
        str(pg.port),
        "-U",
        user,
        "-d",
        db,
        *args,
    ]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def replication_connection(
    pg: PgServer, db: str, user: str = "admin", password: str | None = None
) -> psycopg2.extensions.connection:
    """A psycopg2 logical replication connection to `db` as `user` (the admin by default,
    with the server's token unless `password` is given)."""
    return psycopg2.connect(
        host=pg.host,
        port=pg.port,
        user=user,
        password=pg.token if password is None else password,
        dbname=db,
        connection_factory=psycopg2.extras.LogicalReplicationConnection,
    )


def replication_cursor(
    pg: PgServer, db: str, user: str = "admin", password: str | None = None
) -> tuple[psycopg2.extensions.connection, psycopg2.extras.ReplicationCursor]:
    """`replication_connection` and its replication cursor."""
    connection = replication_connection(pg, db, user, password)
    cursor = connection.cursor()
    assert isinstance(cursor, psycopg2.extras.ReplicationCursor)
    return connection, cursor


def read_messages(
    cursor: psycopg2.extras.ReplicationCursor, count: int, within: float = 10
) -> list[tuple[int, Any]]:
    """Up to `count` streamed messages as (data_start, payload), fewer if `within` seconds
    pass first (the caller's assertion then shows what came)."""
    got: list[tuple[int, Any]] = []
    deadline = time.monotonic() + within
    while len(got) < count and time.monotonic() < deadline:
        message = cursor.read_message()
        if message is None:
            time.sleep(0.01)
            continue
        got.append((message.data_start, message.payload))
    return got


def read_payloads(
    cursor: psycopg2.extras.ReplicationCursor, count: int, within: float = 10
) -> list[Any]:
    """The payloads of `read_messages`."""
    return [payload for _, payload in read_messages(cursor, count, within)]


def current_position(pg: PgServer, db: str) -> str:
    """The durable position in X/Y form, as IDENTIFY_SYSTEM tells it."""
    connection = replication_connection(pg, db)
    try:
        cursor = connection.cursor()
        cursor.execute("IDENTIFY_SYSTEM")
        row = cursor.fetchone()
        assert row is not None
        return str(row[2])
    finally:
        connection.close()


class ProgramOutput:
    """The stdout lines (without their newline) of a running client program, read by a
    thread as they come, so that a test can wait for a line and then make the changes
    the program is to stream."""

    def __init__(self, program: subprocess.Popen[str]) -> None:
        self.program = program
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        assert self.program.stdout is not None
        self.lines.extend(line.rstrip("\n") for line in self.program.stdout)

    def stderr(self) -> str:
        """What the program wrote to stderr (read once it has exited)."""
        return self.program.stderr.read() if self.program.stderr else ""

    def wait_until(self, done: Callable[[list[str]], bool], seconds: float) -> None:
        """Wait until `done(lines)`; fail with the program's stderr if it exits or
        `seconds` pass first."""
        deadline = time.monotonic() + seconds
        while not done(self.lines) and time.monotonic() < deadline:
            if self.program.poll() is not None:
                break
            time.sleep(0.05)
        if not done(self.lines):
            self.program.kill()  # else reading its stderr would wait for it to exit
            raise AssertionError(f"{self.lines!r}; stderr: {self.stderr()}")

    def finish(self, seconds: float = 60) -> None:
        """Wait for the program to exit (killed after `seconds`) and for its last lines;
        fail with its stderr unless it exited 0."""
        try:
            self.program.wait(seconds)
        finally:
            if self.program.poll() is None:
                self.program.kill()
        self._reader.join(10)
        assert self.program.returncode == 0, self.stderr()
