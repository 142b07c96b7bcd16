"""A real server with the PostgreSQL protocol on (`--pg-port 0`) per test module, and a
fresh database per test, reached by real drivers (psycopg, asyncpg) and psql."""

from __future__ import annotations

import asyncio
import datetime
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.http.conftest import Server, running_server

T = TypeVar("T")


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

    def run_asyncpg(self, dbname: str, work: Callable[[Any], Awaitable[T]]) -> T:
        """`await work(conn)` on an asyncpg connection as the admin to `dbname`, closed after."""
        import asyncpg  # only the tests of asyncpg need it

        async def main() -> T:
            conn = await asyncpg.connect(
                host=self.host, port=self.port, user="admin", password=self.token, database=dbname
            )
            try:
                return await work(conn)
            finally:
                await conn.close()

        return asyncio.run(main())


def pg_address(server: Server) -> tuple[str, int]:
    for line in server.lines:
        match = re.match(r"postgres on (\S+):(\d+)$", line)
        if match:
            return match.group(1), int(match.group(2))
    raise AssertionError(f"the server did not print its PostgreSQL port: {server.lines}")


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key, as files in `folder`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "server.crt", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@contextmanager
def tls_pg_server(folder: Path) -> Iterator[PgServer]:
    """A server whose PostgreSQL port speaks TLS with a self-signed certificate made in
    `folder` (its data in folder/data), for the block (`running_server`)."""
    cert, key = self_signed(folder)
    tls = ("--pg-tls-cert", str(cert), "--pg-tls-key", str(key))
    with running_server(folder / "data", "--pg-port", "0", *tls) as running:
        yield PgServer(running, *pg_address(running))


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with running_server(tmp_path_factory.mktemp("pg") / "data", "--pg-port", "0") as running:
        host, port = pg_address(running)
        yield PgServer(running, host, port)


@pytest.fixture
def db(pg: PgServer) -> str:
    """A fresh database for one test."""
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    return name
