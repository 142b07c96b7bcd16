"""A NULL or a string constant written where another value gives the type takes that type,
as PostgreSQL 15's `unknown` does: a side of a set operation, a VALUES row, a CASE branch,
greatest() and least()'s arguments. Each statement's columns (type OIDs and modifiers) and
rows are compared with PostgreSQL's, in text and in binary and prepared; a time is compared
by whether it has a zone (a `timestamp` has none), the session's user by being it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest

from tests.differential.session import connected_pair

SETUP = (
    "CREATE TABLE t (a INT, b TEXT)",
    "INSERT INTO t VALUES (1, 'x')",
    "CREATE VIEW w AS SELECT LOCALTIMESTAMP(3) AS l, CURRENT_TIMESTAMP(1) AS c",
    "SET TIME ZONE 'UTC'",
)
# Each statement and the type OIDs both must give its columns.
UNTYPED = {
    "SELECT LOCALTIMESTAMP AS x UNION ALL SELECT NULL ORDER BY x": [1114],
    "SELECT NULL AS x UNION ALL SELECT LOCALTIMESTAMP(2) ORDER BY x": [1114],
    "SELECT now() AS x UNION SELECT NULL ORDER BY x": [1184],
    "SELECT 1 AS x UNION ALL SELECT NULL ORDER BY x": [23],
    "SELECT 1 AS x, NULL AS y UNION ALL SELECT NULL, true ORDER BY x": [23, 16],
    "SELECT current_user AS x UNION ALL SELECT NULL ORDER BY x": [19],
    "SELECT a FROM t INTERSECT SELECT NULL": [23],
    "SELECT a FROM t EXCEPT SELECT NULL": [23],
    "SELECT LOCALTIMESTAMP AS x UNION ALL SELECT NULL UNION ALL SELECT NULL ORDER BY x": [1114],
    "SELECT NULL AS x UNION SELECT NULL": [25],
    "SELECT CASE WHEN a = 1 THEN LOCALTIMESTAMP ELSE NULL END AS x FROM t": [1114],
    "SELECT CASE WHEN a = 1 THEN NULL ELSE now() END AS x FROM t": [1184],
    "SELECT coalesce(NULL, LOCALTIMESTAMP) AS x": [1114],
    "SELECT greatest(1, 3, 2) AS a, least(1, NULL, 0) AS b, greatest(a, 7) AS c FROM t": [
        23,
        23,
        23,
    ],
    "SELECT greatest(1, 2::bigint) AS a, least('b', 'a') AS b, greatest(true, false) AS c": [
        20,
        25,
        16,
    ],
    "SELECT greatest(current_user, 'a') AS a, least('zzz', current_user) AS b": [19, 19],
    "SELECT greatest(LOCALTIMESTAMP, LOCALTIMESTAMP(2)) AS a, least(now(), LOCALTIMESTAMP) AS b": [
        1114,
        1184,
    ],
    "SELECT greatest(NULL, NULL) AS a, least(1, '5') AS b": [25, 23],
    "SELECT CASE WHEN a = 1 THEN LOCALTIMESTAMP ELSE '2020-01-01' END AS x FROM t": [1114],
    "SELECT CASE a WHEN 2 THEN '2021-01-01' ELSE now() END AS x FROM t": [1184],
    "SELECT coalesce(LOCALTIMESTAMP(2), '2020-01-01') AS x": [1114],
    "SELECT coalesce(NULL, '2020-01-01 10:00:00+00', now()) AS x": [1184],
}


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair(*SETUP) as pair:
        yield pair


def _answer(conn: psycopg.Connection, sql: str, binary: bool, prepare: bool) -> tuple:
    """The columns' type OIDs and modifiers, and the rows as both can write them alike."""
    cursor = conn.cursor(binary=binary)
    cursor.execute(sql, prepare=prepare)
    result = cursor.pgresult
    assert result is not None
    columns = [(result.ftype(i), result.fmod(i)) for i in range(result.nfields)]
    return columns, [tuple(_comparable(v, conn) for v in row) for row in cursor.fetchall()]


def _comparable(value: Any, conn: psycopg.Connection) -> Any:
    if isinstance(value, datetime):
        return "timestamp" if value.tzinfo is None else "timestamptz"
    if value == conn.info.user:
        return "<user>"
    return value


@pytest.mark.parametrize(("binary", "prepare"), [(False, False), (True, False), (True, True)])
def test_an_untyped_value_takes_the_others_type_as_in_postgresql(
    both, binary: bool, prepare: bool
) -> None:
    theirs, ours = both
    for sql, oids in UNTYPED.items():
        pg, mine = (_answer(conn, sql, binary, prepare) for conn in (theirs, ours))
        assert [oid for oid, _ in pg[0]] == oids, f"PostgreSQL: {sql}"
        assert mine == pg, f"{sql}\n  PostgreSQL: {pg}\n  refimpl: {mine}"
