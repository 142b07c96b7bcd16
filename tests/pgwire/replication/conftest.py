"""Logical replication against a real server (`--pg-port 0`), by real clients:
`pg_recvlogical` (PostgreSQL's client package) and psycopg2's replication connection."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

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


def current_position(pg: PgServer, db: str) -> str:
    """The durable position in X/Y form, as IDENTIFY_SYSTEM tells it."""
    connection = psycopg2.connect(
        host=pg.host,
        port=pg.port,
        user="admin",
        password=pg.token,
        dbname=db,
        connection_factory=psycopg2.extras.LogicalReplicationConnection,
    )
    try:
        cursor = connection.cursor()
        cursor.execute("IDENTIFY_SYSTEM")
        row = cursor.fetchone()
        assert row is not None
        return str(row[2])
    finally:
        connection.close()
