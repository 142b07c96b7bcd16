"""A real server with the PostgreSQL protocol on (`--pg-port 0`) per test module, and a
fresh database per test, reached by real drivers (psycopg, asyncpg) and psql."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from tests.http.conftest import Server, start_server


@dataclass
class PgServer:
    http: Server
    host: str
    port: int

    @property
    def token(self) -> str:
        return self.http.token

    def connect(
        self, dbname: str = "demo", user: str = "admin", password: str | None = None, **kwargs: Any
    ) -> psycopg.Connection:
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=user,
            dbname=dbname,
            password=self.token if password is None else password,
            connect_timeout=10,
            **kwargs,
        )


def pg_address(server: Server) -> tuple[str, int]:
    for line in server.lines:
        match = re.match(r"postgres on (\S+):(\d+)$", line)
        if match:
            return match.group(1), int(match.group(2))
    raise AssertionError(f"the server did not print its PostgreSQL port: {server.lines}")


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    running = start_server(tmp_path_factory.mktemp("pg") / "data", "--pg-port", "0")
    try:
        host, port = pg_address(running)
        yield PgServer(running, host, port)
    finally:
        code = running.stop()
        assert code == 0, f"the server exited with {code}: {running.log.read_text()[-3000:]}"


@pytest.fixture
def db(pg: PgServer) -> str:
    """A fresh database for one test."""
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    return name
