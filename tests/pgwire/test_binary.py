"""Every column type in the binary format, both ways, through two real drivers: psycopg with
`binary=True` (binary parameters and binary results) and asyncpg (binary and prepared
statements for everything). Each value is stored through binary parameters, read back in
binary, and must be the value sent."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import values
from tests.hypothesis_settings import OVER_FIXTURE
from tests.pgwire.conftest import PgServer

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=40)
# The engine's whole range of each type, as the driver's Python value.
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "INT": st.integers(values.INT_MIN, values.INT_MAX),
    "BIGINT": st.integers(values.BIGINT_MIN, values.BIGINT_MAX),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),  # a column holds finite ones
    "STRING": TEXT,
    "SYMBOL": TEXT,
    "BOOLEAN": st.booleans(),
    "TIMESTAMP": st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX).map(
        lambda micros: _EPOCH + timedelta(microseconds=micros)
    ),
}
COLUMNS = ", ".join(f"c_{t.lower()} {t}" for t in VALUES)
ROWS = st.fixed_dictionaries({t: st.none() | strategy for t, strategy in VALUES.items()})
SETTINGS = settings(OVER_FIXTURE, max_examples=40)
INSERT_PG = f"INSERT INTO b VALUES (%b, {', '.join(['%b'] * len(VALUES))})"
INSERT_ASYNCPG = f"INSERT INTO b VALUES ({', '.join(f'${n + 1}' for n in range(len(VALUES) + 1))})"


def ordered(row: dict[str, Any]) -> list[Any]:
    """A row's values in the table's column order."""
    return [row[t] for t in VALUES]


def same(a: object, b: object) -> bool:
    """Equal, with -0.0 and 0.0 told apart as PostgreSQL's float8 keeps them."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


@pytest.fixture(scope="module")
def table(pg: PgServer) -> str:
    with pg.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS b")
        conn.execute(f"CREATE TABLE b (id BIGINT PRIMARY KEY, {COLUMNS})")
    return "b"


@SETTINGS
@given(ROWS)
def test_psycopg_binary_parameters_and_results_round_trip_every_type(pg, table, row):
    with pg.connect() as conn:
        cur = conn.cursor(binary=True)
        cur.execute("DELETE FROM b WHERE id = %b", (1,))
        cur.execute(INSERT_PG, (1, *ordered(row)))
        cur.execute("SELECT * FROM b WHERE id = %b", (1,))
        back = cur.fetchone()
        formats = [cur.pgresult.fformat(i) for i in range(cur.pgresult.nfields)]
    assert formats == [1] * (len(VALUES) + 1)
    assert back is not None
    for sent, got in zip(ordered(row), back[1:], strict=True):
        assert same(sent, got), (row, back)


# asyncpg sends datetime.max and datetime.min, the first and last TIMESTAMPs, as 'infinity'
# and '-infinity' (refused below): the round trip takes the microseconds between them.
ASYNCPG_ROWS = ROWS.filter(
    lambda row: (
        row["TIMESTAMP"] not in (datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC))
    )
)


@SETTINGS
@given(ASYNCPG_ROWS)
def test_asyncpg_round_trips_every_type(pg, table, row):
    async def work() -> tuple[Any, Any]:
        conn = await asyncpg.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, database="demo"
        )
        try:
            await conn.execute("DELETE FROM b WHERE id = $1", 2)
            await conn.execute(INSERT_ASYNCPG, 2, *ordered(row))
            stored = await conn.fetchrow("SELECT * FROM b WHERE id = $1", 2)
            # The same values as parameters answered straight back, typed by their casts.
            echoed = await conn.fetchrow(
                "SELECT $1::int AS a, $2::bigint AS b, $3::float8 AS c, $4::text AS d,"
                " $5::bool AS e, $6::timestamptz AS f",
                row["INT"], row["BIGINT"], row["DOUBLE"], row["STRING"], row["BOOLEAN"],
                row["TIMESTAMP"],
            )  # fmt: skip
            return stored, echoed
        finally:
            await conn.close()

    stored, echoed = asyncio.run(work())
    assert stored is not None and echoed is not None
    for sent, got in zip(ordered(row), tuple(stored)[1:], strict=True):
        assert same(sent, got), (row, stored)
    kinds = ("INT", "BIGINT", "DOUBLE", "STRING", "BOOLEAN", "TIMESTAMP")
    for kind, got in zip(kinds, tuple(echoed), strict=True):
        assert same(row[kind], got), (kind, row, echoed)


def test_a_double_that_no_column_holds_is_refused_in_binary_too(pg, table):
    with pg.connect() as conn:
        cur = conn.cursor(binary=True)
        for value in (math.inf, -math.inf, math.nan):
            with pytest.raises(psycopg.errors.DataException, match="out of range for DOUBLE"):
                cur.execute("SELECT %b::float8", (value,))
        cur.execute("SELECT count(*) FROM b WHERE id = %b", (9,))
        assert cur.fetchone() == (0,)


def test_a_binary_parameter_of_the_wrong_length_is_refused_clearly(pg, table):
    with pg.connect() as conn:
        pgconn = conn.pgconn
        # int4 is 4 bytes: 3 cannot be one.
        result = pgconn.exec_params(b"SELECT $1::int", [b"\x00\x00\x01"], [23], [1])
        assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"22000"
        assert b"parameter $1 is not a valid INT" in (result.error_message or b"")
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_asyncpg_infinite_timestamps_are_refused_clearly(pg, table):
    async def work() -> None:
        conn = await asyncpg.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, database="demo"
        )
        try:
            for value in (datetime.max, datetime.min):
                with pytest.raises(asyncpg.DataError, match=r"\(infinity, which no TIMESTAMP"):
                    await conn.execute("INSERT INTO b (id, c_timestamp) VALUES ($1, $2)", 4, value)
            assert await conn.fetchval("SELECT count(*) FROM b WHERE id = 4") == 0
        finally:
            await conn.close()

    asyncio.run(work())
