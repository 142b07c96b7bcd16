"""Arrays are described to a client as arrays of their elements' type, as PostgreSQL 15
describes the same query (`ARRAY[1, 2]` is integer[], not text), and read back as lists by
psycopg in text and binary and by asyncpg; /exec shows their text and type."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.pgwire.conftest import PgServer

# Each expression with the type OID PostgreSQL 15 describes it by.
DESCRIBED = {
    "ARRAY[1, 2]": 1007,
    "ARRAY[1::int8]": 1016,
    "ARRAY['a', 'b']": 1009,
    "ARRAY[1.5::float8]": 1022,
    "ARRAY[true, NULL]": 1000,
    "ARRAY['2026-09-24 10:00:00+00'::timestamptz]": 1185,
    "ARRAY[NULL]": 1009,
    "ARRAY[1, 2]::text[]": 1009,
    "'{1,2}'::int[]": 1007,
    "'{1,2}'::int8[]": 1016,
    "(ARRAY[1, 2])[2]": 23,
    "ARRAY(SELECT 'x')": 1009,
}


def test_arrays_are_described_by_their_elements_type(pg: PgServer, db: str) -> None:
    query = "SELECT " + ", ".join(DESCRIBED)
    with pg.connect(db) as conn:
        cursor = conn.execute(query)
        described = [column.type_code for column in cursor.description or []]
    assert dict(zip(DESCRIBED, described, strict=True)) == DESCRIBED


def test_unnest_keeps_its_elements_type(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        in_list = conn.execute("SELECT unnest(ARRAY[1, 2]) AS x")
        in_from = conn.execute("SELECT x FROM unnest(ARRAY[1.5::float8, NULL]) x")
        answers = [
            ([c.type_code for c in cursor.description or []], cursor.fetchall())
            for cursor in (in_list, in_from)
        ]
    assert answers == [([23], [(1,), (2,)]), ([701], [(1.5,), (None,)])]


ROW = (
    "SELECT ARRAY[1, NULL, 3] AS ints, ARRAY['a b', '', 'NULL', 'q\"'] AS texts,"
    " ARRAY[true, false] AS flags, ARRAY[0.5::float8] AS doubles,"
    " ARRAY['2026-09-24T10:00:00.5Z'::timestamptz] AS times, ARRAY[2::int8] AS bigs"
)
EXPECTED = (
    [1, None, 3],
    ["a b", "", "NULL", 'q"'],
    [True, False],
    [0.5],
    [datetime(2026, 9, 24, 10, 0, 0, 500000, tzinfo=UTC)],
    [2],
)


def test_psycopg_reads_arrays_as_lists_in_text_and_binary(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        answers = [conn.cursor(binary=binary).execute(ROW).fetchone() for binary in (False, True)]
    assert answers == [EXPECTED, EXPECTED]


def test_asyncpg_reads_arrays_as_lists(pg: PgServer, db: str) -> None:
    async def work(conn: Any) -> Any:
        return tuple(await conn.fetchrow(ROW))

    assert pg.run_asyncpg(db, work) == EXPECTED


def test_exec_answers_an_arrays_text_and_its_type(pg: PgServer, db: str) -> None:
    answer = pg.http.sql(
        "SELECT ARRAY[1, 2] AS a, ARRAY['x y'] AS b, ARRAY[1, 'z'] AS mixed, '{1}'::int[] AS c",
        db,
    )
    assert [(c["name"], c["type"]) for c in answer["columns"]] == [
        ("a", "INT[]"),
        ("b", "STRING[]"),
        ("mixed", "STRING"),
        ("c", "INT[]"),
    ]
    assert answer["dataset"] == [["{1,2}", '{"x y"}', "{1,z}", "{1}"]]


def test_a_cast_to_an_array_checks_each_element(pg: PgServer, db: str) -> None:
    for sql, error in (
        ("SELECT '{1,a}'::int[]", "'a' is not a valid INT"),
        ("SELECT '1 2'::int[]", "is not an array; write it as '{a,b}'"),
        ("SELECT 5::int[]", "cannot cast INT to int[]: it is no array"),
    ):
        answer = pg.http.exec(sql, db)
        assert answer.status_code == 400 and error in answer.json()["error"], (sql, answer.text)
