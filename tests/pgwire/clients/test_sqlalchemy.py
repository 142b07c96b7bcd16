"""SQLAlchemy 2 with the `postgresql+psycopg` dialect against a real server's PostgreSQL
port, unmodified: it connects (the settings and catalog queries its dialect sends, kept in
captured/sqlalchemy.sql), creates and drops tables, runs Core statements with bound
parameters, RETURNING and "insertmanyvalues" batches, ORM sessions with savepoints, and
inspects tables, columns and views."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.ext.asyncio import create_async_engine

from tests.pgwire.clients.capture import Relay, normalised, record, relay
from tests.pgwire.clients.conftest import engine, url
from tests.pgwire.conftest import PgServer


@pytest.fixture
def captured(pg: PgServer) -> Iterator[Relay]:
    with relay(pg.host, pg.port) as running:
        yield running


def items_table(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "items",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(20)),
        sa.Column("price", sa.Float),
        sa.Column("at", sa.DateTime(timezone=True)),
    )


def test_the_dialect_connects_creates_writes_reads_and_inspects(
    pg: PgServer, db: str, captured: Relay
) -> None:
    eng = engine(pg, db, captured.port)
    metadata = sa.MetaData()
    items = items_table(metadata)
    metadata.create_all(eng)
    metadata.create_all(eng)  # its existence check finds the table: nothing is sent again
    with eng.begin() as conn:
        returned = conn.execute(
            sa.insert(items).returning(items.c.id, items.c.name),
            [{"id": n, "name": f"n{n}", "price": n / 2, "at": None} for n in range(1, 6)],
        )
        assert sorted(returned.all()) == [(n, f"n{n}") for n in range(1, 6)]
        conn.execute(sa.update(items).where(items.c.id == 2).values(name="two"))
        conn.execute(sa.delete(items).where(items.c.id > 4))
        rows = conn.execute(sa.select(items.c.id, items.c.name).order_by(items.c.id)).all()
    assert rows == [(1, "n1"), (2, "two"), (3, "n3"), (4, "n4")]
    assert pg.http.rows("SELECT count(*) FROM items", db) == [[4]]
    inspector = sa.inspect(eng)
    assert inspector.get_table_names() == ["items"]
    columns = {c["name"]: str(c["type"]) for c in inspector.get_columns("items")}
    assert columns == {
        "id": "BIGINT",  # INTEGER is BIGINT here (spec/types-and-values.md)
        "name": "TEXT",
        "price": "DOUBLE PRECISION",
        "at": "TIMESTAMP",
    }
    metadata.drop_all(eng)
    assert sa.inspect(eng).get_table_names() == []
    record("sqlalchemy", normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}))


def test_inspect_answers_keys_indexes_and_constraints_as_postgres_does(
    pg: PgServer, db: str, captured: Relay
) -> None:
    pg.http.sql(
        "CREATE TABLE quotes (sym STRING, at TIMESTAMP, px DOUBLE, venue STRING UNIQUE,"
        " seq BIGINT, PRIMARY KEY (sym, at), UNIQUE (seq, sym))",
        db,
    )
    pg.http.sql("CREATE INDEX quotes_px ON quotes (px, venue)", db)
    pg.http.sql("CREATE UNIQUE INDEX quotes_seq ON quotes (seq)", db)
    inspector = sa.inspect(engine(pg, db, captured.port))
    # What SQLAlchemy reads from PostgreSQL 15 for the same table, names included.
    assert inspector.get_pk_constraint("quotes") == {
        "constrained_columns": ["sym", "at"],
        "name": "quotes_pkey",
        "comment": None,
        "dialect_options": {"postgresql_include": []},
    }
    assert inspector.get_unique_constraints("quotes") == [
        {
            "column_names": ["seq", "sym"],
            "name": "quotes_seq_sym_key",
            "comment": None,
            "dialect_options": {"postgresql_include": [], "postgresql_nulls_not_distinct": False},
        },
        {
            "column_names": ["venue"],
            "name": "quotes_venue_key",
            "comment": None,
            "dialect_options": {"postgresql_include": [], "postgresql_nulls_not_distinct": False},
        },
    ]
    indexes = {i["name"]: i for i in inspector.get_indexes("quotes")}
    assert indexes == {
        "quotes_px": {
            "name": "quotes_px",
            "unique": False,
            "column_names": ["px", "venue"],
            "dialect_options": {"postgresql_include": []},
        },
        "quotes_seq": {
            "name": "quotes_seq",
            "unique": True,
            "column_names": ["seq"],
            "dialect_options": {"postgresql_include": []},
        },
        "quotes_seq_sym_key": {
            "name": "quotes_seq_sym_key",
            "unique": True,
            "column_names": ["seq", "sym"],
            "duplicates_constraint": "quotes_seq_sym_key",
            "dialect_options": {"postgresql_include": []},
        },
        "quotes_venue_key": {
            "name": "quotes_venue_key",
            "unique": True,
            "column_names": ["venue"],
            "duplicates_constraint": "quotes_venue_key",
            "dialect_options": {"postgresql_include": []},
        },
    }
    assert inspector.get_foreign_keys("quotes") == []
    assert inspector.get_check_constraints("quotes") == []
    # A table reflected whole: its key and indexes come back as SQLAlchemy objects.
    table = sa.Table("quotes", sa.MetaData(), autoload_with=engine(pg, db, captured.port))
    assert [c.name for c in table.primary_key.columns] == ["sym", "at"]
    assert sorted(str(i.name) for i in table.indexes) == ["quotes_px", "quotes_seq"]
    record("sqlalchemy-inspect", normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}))


def test_insertmanyvalues_batches_and_returning_keep_the_rows_order(pg: PgServer, db: str) -> None:
    eng = engine(pg, db)
    metadata = sa.MetaData()
    items = items_table(metadata)
    metadata.create_all(eng)
    rows = [{"id": n, "name": str(n), "price": None, "at": None} for n in range(2500)]
    with eng.begin() as conn:
        # More rows than one batch holds (1000): SQLAlchemy sends several INSERT ... VALUES
        # (...), (...) RETURNING statements and matches the rows returned to its parameters.
        got = conn.execute(
            sa.insert(items).returning(items.c.id, sort_by_parameter_order=True), rows
        )
        assert [r.id for r in got] == list(range(2500))
    assert pg.http.rows("SELECT count(*), min(id), max(id) FROM items", db) == [[2500, 0, 2499]]


def test_orm_sessions_commit_roll_back_and_nest(pg: PgServer, db: str) -> None:
    class Base(orm.DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "items"
        id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
        name: orm.Mapped[str | None]

    eng = engine(pg, db)
    Base.metadata.create_all(eng)
    with orm.Session(eng) as session:
        session.add(Item(id=1, name="kept"))
        session.commit()
        session.add(Item(id=2, name="also kept"))
        nested = session.begin_nested()  # SAVEPOINT
        session.add(Item(id=3, name="undone"))
        session.flush()
        nested.rollback()  # ROLLBACK TO SAVEPOINT: item 3 goes, item 2 stays
        session.commit()
        session.add(Item(id=4, name="rolled back"))
        session.flush()
        session.rollback()
        names = session.scalars(sa.select(Item.name).order_by(Item.id)).all()
    assert names == ["kept", "also kept"]
    assert pg.http.rows("SELECT id FROM items ORDER BY id", db) == [[1], [2]]


def test_a_duplicate_key_inside_a_nested_transaction_leaves_the_outer_one_usable(
    pg: PgServer, db: str
) -> None:
    eng = engine(pg, db)
    metadata = sa.MetaData()
    items = items_table(metadata)
    metadata.create_all(eng)
    with eng.connect() as conn:
        with conn.begin():
            conn.execute(sa.insert(items).values(id=1, name="first"))
            with pytest.raises(sa.exc.IntegrityError):
                with conn.begin_nested():
                    conn.execute(sa.insert(items).values(id=1, name="again"))
            conn.execute(sa.insert(items).values(id=2, name="second"))
    assert pg.http.rows("SELECT id, name FROM items ORDER BY id", db) == [
        [1, "first"],
        [2, "second"],
    ]


def test_views_are_inspected_and_unsupported_column_types_answer_0a000(
    pg: PgServer, db: str
) -> None:
    eng = engine(pg, db)
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v DOUBLE)", db)
    pg.http.sql("CREATE VIEW big AS SELECT id FROM t WHERE v > 10", db)
    inspector = sa.inspect(eng)
    assert inspector.get_view_names() == ["big"]
    assert inspector.has_table("t") and not inspector.has_table("nope")
    metadata = sa.MetaData()
    sa.Table("s", metadata, sa.Column("id", sa.Integer, primary_key=True))  # SERIAL
    with pytest.raises(sa.exc.NotSupportedError, match="SERIAL is not supported"):
        metadata.create_all(eng)


def test_the_asyncpg_dialect_reads_writes_and_nests(pg: PgServer, db: str) -> None:
    asyncpg = url(pg, db, "asyncpg")

    async def run() -> list[tuple[int, float]]:
        eng = create_async_engine(asyncpg, poolclass=sa.NullPool)
        try:
            async with eng.begin() as conn:
                await conn.execute(sa.text("CREATE TABLE t (id INT PRIMARY KEY, v DOUBLE)"))
                rows = [{"i": 1, "v": 1.5}, {"i": 2, "v": 2.5}]
                await conn.execute(sa.text("INSERT INTO t VALUES (:i, :v)"), rows)
                nested = await conn.begin_nested()
                await conn.execute(sa.text("INSERT INTO t VALUES (3, 3.5)"))
                await nested.rollback()
                result = await conn.execute(sa.text("SELECT id, v FROM t ORDER BY id"))
                return [(r.id, r.v) for r in result]
        finally:
            await eng.dispose()

    assert asyncio.run(run()) == [(1, 1.5), (2, 2.5)]


def test_the_asyncpg_dialect_inspects_keys_and_unique_constraints(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (a STRING, b BIGINT UNIQUE, PRIMARY KEY (a))", db)
    asyncpg = url(pg, db, "asyncpg")

    def inspect(conn: sa.Connection) -> tuple[Any, Any]:
        inspector = sa.inspect(conn)
        return inspector.get_pk_constraint("t"), inspector.get_unique_constraints("t")

    async def run() -> tuple[Any, Any]:
        eng = create_async_engine(asyncpg, poolclass=sa.NullPool)
        try:
            async with eng.connect() as conn:
                return await conn.run_sync(inspect)
        finally:
            await eng.dispose()

    key, unique = asyncio.run(run())
    assert key == {
        "constrained_columns": ["a"],
        "name": "t_pkey",
        "comment": None,
        "dialect_options": {"postgresql_include": []},
    }
    assert [(u["name"], u["column_names"]) for u in unique] == [("t_b_key", ["b"])]


# asyncpg asks the catalog about the answer's bool[] and int2vector columns with its
# introspection query, whose oid[] column it reads without asking again: were that column
# described as bigint[], asyncpg would introspect bigint[] by the same query, and again,
# until Python's recursion limit.
def test_the_asyncpg_dialect_inspects_indexes_as_the_psycopg_dialect_does(
    pg: PgServer, db: str
) -> None:
    pg.http.sql("CREATE TABLE t (a STRING, b BIGINT UNIQUE, c DOUBLE, PRIMARY KEY (a))", db)
    pg.http.sql("CREATE INDEX t_c_b ON t (c, b)", db)
    pg.http.sql("CREATE UNIQUE INDEX t_c ON t (c)", db)
    asyncpg = url(pg, db, "asyncpg")

    def indexes(conn: sa.Connection) -> list[Any]:
        return sa.inspect(conn).get_indexes("t")

    async def run() -> list[Any]:
        eng = create_async_engine(asyncpg, poolclass=sa.NullPool)
        try:
            async with eng.connect() as conn:
                return await conn.run_sync(indexes)
        finally:
            await eng.dispose()

    answer = asyncio.run(run())
    assert answer == sa.inspect(engine(pg, db)).get_indexes("t")
    assert {i["name"]: (i["column_names"], i["unique"]) for i in answer} == {
        "t_b_key": (["b"], True),
        "t_c": (["c"], True),
        "t_c_b": (["c", "b"], False),
    }
