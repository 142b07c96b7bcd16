"""asyncpg as an application uses it, against a real server: fetch and its variants,
executemany, cursors read in parts, binary COPY in (`copy_records_to_table`) and out
(`copy_from_query`, `copy_from_table`), COPY in from a file-like source, add_listener on a
plain channel and on a table's change channel, and transactions."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

CREATE = (
    "CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE, name STRING, ok BOOLEAN,"
    " at TIMESTAMP)"
)
AT = datetime(2026, 9, 24, 10, 0, 0, 250000, UTC)


def test_fetch_fetchrow_fetchval_and_executemany(pg, db):
    rows = [(n, n * 2**33, n / 4, f"row {n}", n % 2 == 0, AT) for n in range(300)]

    async def work(conn: asyncpg.Connection) -> tuple[Any, ...]:
        await conn.execute(CREATE)
        await conn.executemany("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6)", rows)
        every = await conn.fetch("SELECT * FROM t ORDER BY id")
        one = await conn.fetchrow("SELECT name, ok FROM t WHERE id = $1", 7)
        count = await conn.fetchval("SELECT count(*) FROM t WHERE ok AND x < $1", 10.0)
        none = await conn.fetchrow("SELECT * FROM t WHERE id = $1", -1)
        return [tuple(r) for r in every], dict(one), count, none

    every, one, count, none = pg.run_asyncpg(db, work)
    assert every == rows
    assert one == {"name": "row 7", "ok": False}
    assert count == 20 and none is None


def test_a_cursor_reads_in_parts_inside_a_transaction(pg, db):
    async def work(conn: asyncpg.Connection) -> tuple[list[int], list[int]]:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await conn.executemany("INSERT INTO t VALUES ($1)", [(n,) for n in range(1, 101)])
        async with conn.transaction():
            streamed = [
                r["id"] async for r in conn.cursor("SELECT id FROM t ORDER BY id", prefetch=7)
            ]
            cursor = await conn.cursor("SELECT id FROM t WHERE id > $1 ORDER BY id", 90)
            parts = [r["id"] for r in await cursor.fetch(4)] + [
                r["id"] for r in await cursor.fetch(100)
            ]
        return streamed, parts

    streamed, parts = pg.run_asyncpg(db, work)
    assert streamed == list(range(1, 101))
    assert parts == list(range(91, 101))


def test_cursor_forward_skips_rows_of_its_portal(pg, db):
    async def work(conn: asyncpg.Connection) -> tuple[int, list[int], int]:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await conn.executemany("INSERT INTO t VALUES ($1)", [(n,) for n in range(1, 11)])
        async with conn.transaction():
            cursor = await conn.cursor("SELECT id FROM t ORDER BY id")
            skipped = await cursor.forward(3)  # MOVE FORWARD 3 of asyncpg's portal
            read = [r["id"] for r in await cursor.fetch(2)]
            past = await cursor.forward(100)
        return skipped, read, past

    assert pg.run_asyncpg(db, work) == (3, [4, 5], 5)


def test_copy_records_to_table_and_copy_out_in_binary_and_csv(pg, db):
    records = [(n, n, n + 0.5, f"é {n}", n % 3 == 0, AT) for n in range(10_000)]

    async def work(conn: asyncpg.Connection) -> tuple[Any, ...]:
        await conn.execute(CREATE)
        copied = await conn.copy_records_to_table("t", records=records)
        some = await conn.copy_records_to_table(
            "t", records=[(20_000, "named")], columns=["id", "name"]
        )
        csv_out = io.BytesIO()
        await conn.copy_from_query(
            "SELECT id, name FROM t WHERE id >= 9998 ORDER BY id", output=csv_out, format="csv"
        )
        binary_out = io.BytesIO()
        table_copied = await conn.copy_from_table("t", output=binary_out, format="binary")
        again = await conn.copy_to_table(
            "u", source=io.BytesIO(binary_out.getvalue()), format="binary"
        )
        same = await conn.fetchval(
            "SELECT count(*) FROM t JOIN u ON t.id = u.id WHERE t.name = u.name AND t.at = u.at"
        )
        return copied, some, csv_out.getvalue(), table_copied, again, same

    pg.run_asyncpg(db, lambda conn: conn.execute(CREATE.replace("TABLE t", "TABLE u")))
    copied, some, csv_text, table_copied, again, same = pg.run_asyncpg(db, work)
    assert (copied, some, table_copied, again) == (
        "COPY 10000",
        "COPY 1",
        "COPY 10001",
        "COPY 10001",
    )
    assert csv_text.decode() == "9998,é 9998\n9999,é 9999\n20000,named\n"
    assert same == 10_000  # the one row with a NULL name joins no row


def test_copy_records_that_break_a_key_copy_nothing(pg, db):
    async def work(conn: asyncpg.Connection) -> int:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        await conn.execute("INSERT INTO t VALUES (5, 'there')")
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.copy_records_to_table("t", records=[(1, "a"), (5, "again")])
        with pytest.raises(asyncpg.UndefinedTableError):
            await conn.copy_records_to_table("nowhere", records=[(1, "a")])
        return await conn.fetchval("SELECT count(*) FROM t")

    assert pg.run_asyncpg(db, work) == 1


def test_add_listener_on_a_channel_and_on_a_table(pg, db):
    async def work(conn: asyncpg.Connection) -> list[tuple[str, str]]:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

        def heard(_conn: object, _pid: int, channel: str, payload: str) -> None:
            got.put_nowait((channel, payload))

        await conn.add_listener("jobs", heard)
        await conn.add_listener("kdb_changes.t", heard)
        writer = await asyncpg.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, database=db
        )
        try:
            await writer.execute("NOTIFY jobs, 'go'")
            await writer.execute("INSERT INTO t VALUES ($1, $2)", 1, "one")
            heard_all = [await asyncio.wait_for(got.get(), 5) for _ in range(2)]
            await conn.remove_listener("jobs", heard)
            await writer.execute("NOTIFY jobs, 'unheard'")
            await asyncio.sleep(0.3)
            assert got.empty()
            return heard_all
        finally:
            await writer.close()

    (channel, payload), (table_channel, change) = pg.run_asyncpg(db, work)
    assert (channel, payload) == ("jobs", "go")
    assert table_channel == "kdb_changes.t"
    assert json.loads(change)["row"] == {"id": 1, "name": "one"}


def test_a_transaction_commits_or_rolls_back_as_a_whole(pg, db):
    async def work(conn: asyncpg.Connection) -> list[int]:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        async with conn.transaction():
            await conn.execute("INSERT INTO t VALUES (1)")
            await conn.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await conn.execute("INSERT INTO t VALUES (3)")
                raise RuntimeError("the application gives up")
        return [r["id"] for r in await conn.fetch("SELECT id FROM t ORDER BY id")]

    assert pg.run_asyncpg(db, work) == [1, 2]


def test_a_nested_transaction_is_a_savepoint(pg, db):
    async def work(conn: asyncpg.Connection) -> list[int]:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        async with conn.transaction():
            await conn.execute("INSERT INTO t VALUES (1)")
            with pytest.raises(asyncpg.UniqueViolationError):
                async with conn.transaction():  # SAVEPOINT ... ROLLBACK TO SAVEPOINT
                    await conn.execute("INSERT INTO t VALUES (2)")
                    await conn.execute("INSERT INTO t VALUES (1)")
            await conn.execute("INSERT INTO t VALUES (3)")
        return [r["id"] for r in await conn.fetch("SELECT id FROM t ORDER BY id")]

    assert pg.run_asyncpg(db, work) == [1, 3]
