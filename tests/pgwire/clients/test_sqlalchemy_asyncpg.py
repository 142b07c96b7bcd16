"""SQLAlchemy 2's `postgresql+asyncpg` dialect inspects as its `postgresql+psycopg` dialect
does: asyncpg asks the server with prepared statements in binary and looks up in the
catalog every type it does not know (its introspection query), so each inspect call here
is the whole path. The SQL it sends is kept in captured/sqlalchemy-asyncpg-inspect.sql."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from tests.pgwire.clients.capture import Relay, normalised, record, relay
from tests.pgwire.clients.conftest import engine, url
from tests.pgwire.conftest import PgServer


@pytest.fixture
def captured(pg: PgServer) -> Iterator[Relay]:
    with relay(pg.host, pg.port) as running:
        yield running


def inspected(pg: PgServer, db: str, port: int, ask: Callable[[sa.Inspector], Any]) -> Any:
    """`ask(inspector)` through the asyncpg dialect, connected to `port`."""

    def run_sync(conn: sa.Connection) -> Any:
        return ask(sa.inspect(conn))

    async def run() -> Any:
        eng = create_async_engine(url(pg, db, "asyncpg", port), poolclass=sa.NullPool)
        try:
            async with eng.connect() as conn:
                return await conn.run_sync(run_sync)
        finally:
            await eng.dispose()

    return asyncio.run(run())


def columns(inspector: sa.Inspector, table: str) -> list[dict[str, Any]]:
    # A type object equals only itself: its text (`DOUBLE PRECISION`) is compared instead.
    return [{**c, "type": str(c["type"])} for c in inspector.get_columns(table)]


def everything(inspector: sa.Inspector) -> dict[str, Any]:
    return {
        "tables": inspector.get_table_names(),
        "views": inspector.get_view_names(),
        "columns": columns(inspector, "quotes"),
        "view columns": columns(inspector, "dear"),
        "pk": inspector.get_pk_constraint("quotes"),
        "fk": inspector.get_foreign_keys("quotes"),
        "unique": inspector.get_unique_constraints("quotes"),
        "indexes": inspector.get_indexes("quotes"),
        "checks": inspector.get_check_constraints("quotes"),
        "has": (inspector.has_table("quotes"), inspector.has_table("nope")),
        "view definition": inspector.get_view_definition("dear"),
    }


def test_every_inspect_call_answers_as_through_psycopg(
    pg: PgServer, db: str, captured: Relay
) -> None:
    pg.http.sql(
        "CREATE TABLE quotes (sym SYMBOL, at TIMESTAMP, price DOUBLE, size BIGINT UNIQUE,"
        " open BOOLEAN, n INT, note STRING, PRIMARY KEY (sym, at))",
        db,
    )
    pg.http.sql("CREATE INDEX quotes_price ON quotes (price, n)", db)
    pg.http.sql("CREATE VIEW dear AS SELECT sym, price FROM quotes WHERE price > 10", db)
    through_asyncpg = inspected(pg, db, captured.port, everything)
    assert through_asyncpg == everything(sa.inspect(engine(pg, db)))
    assert through_asyncpg["tables"] == ["quotes"]
    assert [(c["name"], c["type"]) for c in through_asyncpg["columns"]] == [
        ("sym", "TEXT"), ("at", "TIMESTAMP"), ("price", "DOUBLE PRECISION"), ("size", "BIGINT"),
        ("open", "BOOLEAN"), ("n", "INTEGER"), ("note", "TEXT"),
    ]  # fmt: skip
    assert through_asyncpg["pk"]["constrained_columns"] == ["sym", "at"]
    assert {i["name"]: i["column_names"] for i in through_asyncpg["indexes"]} == {
        "quotes_price": ["price", "n"],
        "quotes_size_key": ["size"],
    }
    record(
        "sqlalchemy-asyncpg-inspect",
        normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}),
    )
