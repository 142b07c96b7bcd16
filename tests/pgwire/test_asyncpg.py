"""asyncpg, a driver with protocol code of its own: the extended protocol and binary formats
throughout, parameter types from ParameterDescription, named statements, cursors that fetch
in parts (Execute with a row limit, PortalSuspended)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

ROW = (1, 2**40, 1.5, "é'x", "s", True, datetime(2026, 9, 24, 10, 0, 0, 250000, UTC))


def test_every_type_round_trips_in_binary(pg, db):
    async def work(conn):
        await conn.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE,"
            " name STRING, sym SYMBOL, b BOOLEAN, ts TIMESTAMP)"
        )
        await conn.execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7)", *ROW)
        await conn.execute("INSERT INTO t (id) VALUES ($1)", 2)
        one = await conn.fetchrow("SELECT * FROM t WHERE id = $1", 1)
        empty = await conn.fetchrow("SELECT * FROM t WHERE id = $1", 2)
        ranged = await conn.fetch(
            "SELECT id FROM t WHERE ts BETWEEN $1 AND $2 AND x > $3", ROW[6], ROW[6], 1.0
        )
        return tuple(one), tuple(empty), [r["id"] for r in ranged]

    one, empty, ranged = pg.run_asyncpg(db, work)
    assert one == ROW
    assert empty == (2, None, None, None, None, None, None)
    assert ranged == [1]


def test_a_cursor_fetches_in_parts(pg, db):
    async def work(conn):
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await conn.execute("INSERT INTO t VALUES (1), (2), (3), (4), (5)")
        statement = await conn.prepare("SELECT id FROM t WHERE id > $1 ORDER BY id")
        async with conn.transaction():
            cursor = await statement.cursor(0)
            first, rest = await cursor.fetch(2), await cursor.fetch(9)
        return [r["id"] for r in first], [r["id"] for r in rest]

    assert pg.run_asyncpg(db, work) == ([1, 2], [3, 4, 5])


def test_a_failed_transaction_rolls_back(pg, db):
    async def work(conn):
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        with pytest.raises(asyncpg.UniqueViolationError):
            async with conn.transaction():
                await conn.execute("INSERT INTO t VALUES (1)")
                await conn.execute("INSERT INTO t VALUES (1)")
        return await conn.fetchval("SELECT count(*) FROM t")

    assert pg.run_asyncpg(db, work) == 0


def test_errors_and_statement_descriptions(pg, db):
    async def work(conn):
        with pytest.raises(asyncpg.UndefinedTableError):
            await conn.fetch("SELECT * FROM nowhere WHERE id = $1", 1)
        with pytest.raises(asyncpg.PostgresSyntaxError):
            await conn.prepare("SELECT FROM WHERE")
        statement = await conn.prepare("SELECT $1 + 1 AS n")
        return [a.name for a in statement.get_attributes()], await statement.fetchval(41)

    assert pg.run_asyncpg(db, work) == (["n"], 42)


def test_an_array_parameter_is_described_as_its_array_type_and_read_from_binary(pg, db):
    # asyncpg's catalog queries send `$1::oid[]`: it encodes a list by the type it is told
    # (binary oid[], text[]), and the description's dry run takes an empty array for it.
    async def work(conn):
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        await conn.execute("INSERT INTO t VALUES (1, 'a b'), (2, 'c'), (3, 'd')")
        by_oid = await conn.prepare("SELECT typname FROM pg_type WHERE oid = ANY ($1::oid[])")
        by_name = await conn.prepare("SELECT id FROM t WHERE name = ANY ($1::text[]) ORDER BY id")
        return (
            [p.name for p in by_oid.get_parameters() + by_name.get_parameters()],
            sorted(r["typname"] for r in await by_oid.fetch([25, 20])),
            [r["id"] for r in await by_name.fetch(["a b", "d", None])],
            await by_name.fetch([]),
        )

    described, typnames, ids, none = pg.run_asyncpg(db, work)
    assert described == ["oid[]", "text[]"]
    assert typnames == ["int8", "text"]
    assert ids == [1, 3]
    assert none == []
