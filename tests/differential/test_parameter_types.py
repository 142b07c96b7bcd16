"""Untyped parameters take their type from their place, as PostgreSQL infers it: drivers
that send every value as text of no type (node-postgres, psycopg's strings) get an INT
column's value read as an INT, and drivers that ask (asyncpg) are told the type in
ParameterDescription. Real drivers, a real server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import asyncpg
import psycopg
import pytest

from tests.http.conftest import running_server
from tests.pgwire.conftest import PgServer, pg_address

CREATE = (
    "CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE, name STRING, b BOOLEAN,"
    " ts TIMESTAMP)"
)


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with running_server(tmp_path_factory.mktemp("pg") / "data", "--pg-port", "0") as running:
        host, port = pg_address(running)
        yield PgServer(running, host, port)


@pytest.fixture
def db(pg: PgServer) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    with pg.connect(name) as conn:
        conn.execute(CREATE)
    return name


def _untyped(conn: psycopg.Connection, sql: str, values: list[str]) -> list[tuple]:
    """Run `sql` with every value sent as text of no type (OID 0), as node-postgres does:
    psycopg sends a Python str so."""
    cursor = conn.execute(sql, values, prepare=True)
    return cursor.fetchall() if cursor.description else []


def test_untyped_values_of_an_insert_take_their_columns_types(pg, db) -> None:
    with pg.connect(db) as conn:
        _untyped(
            conn,
            "INSERT INTO t (id, big, x, name, b, ts) VALUES (%s, %s, %s, %s, %s, %s),"
            " (%s, %s, %s, %s, %s, %s)",
            ["1", "10", "1.5", "one", "true", "2026-01-01T00:00:00Z"]
            + ["2", "20", "2.5", "two", "false", "2026-01-02T00:00:00Z"],
        )
        rows = conn.execute("SELECT id, big, x, name, b FROM t ORDER BY id").fetchall()
    assert rows == [(1, 10, 1.5, "one", True), (2, 20, 2.5, "two", False)]


def test_untyped_values_take_the_type_of_their_place(pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("INSERT INTO t VALUES (1, 10, 1.5, 'one', true, '2026-01-01T00:00:00Z')")
        conn.execute("INSERT INTO t VALUES (2, 20, 2.5, 'two', false, '2026-01-02T00:00:00Z')")
        _untyped(conn, "UPDATE t SET big = %s WHERE id = %s", ["11", "1"])
        assert _untyped(conn, "SELECT big FROM t WHERE id = %s", ["1"]) == [(11,)]
        assert _untyped(conn, "SELECT id FROM t AS a WHERE a.big > %s", ["15"]) == [(2,)]
        assert _untyped(conn, "SELECT id FROM t WHERE %s < x + 1 ORDER BY id", ["3"]) == [(2,)]
        assert _untyped(conn, "SELECT id FROM t WHERE id IN (%s, %s) ORDER BY id", ["2", "3"]) == [
            (2,)
        ]
        assert _untyped(conn, "SELECT coalesce(%s, big) + 1 FROM t WHERE id = 1", ["1"]) == [(2,)]
        assert _untyped(conn, "SELECT abs(%s - big) FROM t WHERE id = 2", ["25"]) == [(5,)]
        assert _untyped(conn, "SELECT upper(%s)", ["a"]) == [("A",)]


def test_parameter_description_tells_the_inferred_types(pg, db) -> None:
    async def describe() -> list[list[str]]:
        conn = await asyncpg.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, database=db
        )
        try:
            found = []
            for sql in (
                "INSERT INTO t (id, name, x) VALUES ($1, $2, $3)",
                "UPDATE t SET b = $1, ts = $2 WHERE big = $3",
                "SELECT id FROM t AS a WHERE a.x BETWEEN $1 AND $2 AND coalesce($3, a.id) = 1",
                "SELECT upper($1), id FROM t LIMIT $2",
            ):
                statement = await conn.prepare(sql)
                found.append([p.name for p in statement.get_parameters()])
            return found
        finally:
            await conn.close()

    assert asyncio.run(describe()) == [
        ["int4", "text", "float8"],
        ["bool", "timestamptz", "int8"],
        ["float8", "float8", "int4"],
        ["text", "int8"],
    ]
