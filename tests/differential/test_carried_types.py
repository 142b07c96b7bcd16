"""The types PostgreSQL 15 gives SQL's value functions (`name` for the session's names,
`timestamp` for LOCALTIMESTAMP) carried where PostgreSQL carries them: through a subquery,
a view, a WITH table, a join's USING, a set operation and a scalar subquery, into CASE,
coalesce, nullif, date_trunc, max and min. Each statement's columns are compared by type
OID with PostgreSQL's, in text and in binary and prepared, and their values read alike
(a `timestamp` without a zone on both)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from tests.differential.session import connected_pair

SETUP = (
    "CREATE TABLE t (a INT, b TEXT)",
    "INSERT INTO t VALUES (1, 'x')",
    "CREATE VIEW v AS SELECT current_user AS u, LOCALTIMESTAMP AS l, b FROM t",
    "CREATE VIEW w AS SELECT LOCALTIMESTAMP(3) AS l, CURRENT_TIMESTAMP(1) AS c",
    "SET TIME ZONE 'UTC'",
)
# Each statement and the type OIDs both must give its columns.
CARRIED = {
    "SELECT x FROM (SELECT current_user AS x) s": [19],
    "SELECT * FROM (SELECT session_user AS s, LOCALTIMESTAMP(3) AS l, 1 AS n) q": [19, 1114, 23],
    "SELECT u, l, b FROM v": [19, 1114, 25],
    "SELECT * FROM v": [19, 1114, 25],
    "SELECT v.u FROM v JOIN t ON t.b = v.b": [19],
    "WITH c AS (SELECT current_user AS u, LOCALTIMESTAMP AS l) SELECT u, l FROM c": [19, 1114],
    "WITH c(z) AS (SELECT current_catalog) SELECT z FROM c": [19],
    "SELECT x FROM (SELECT current_user AS x) s JOIN (SELECT session_user AS x) r USING (x)": [19],
    "SELECT u, count(*) AS n FROM v GROUP BY u": [19, 20],
    "SELECT (SELECT current_user) AS x": [19],
    "SELECT (SELECT current_user UNION SELECT 'a' ORDER BY 1 LIMIT 1) AS x": [19],
    "SELECT current_user UNION SELECT session_user": [19],
    "SELECT current_user AS x UNION ALL SELECT 'a' ORDER BY x": [19],
    "SELECT 'a' AS x UNION SELECT current_user ORDER BY x": [19],
    "SELECT current_user AS x UNION SELECT b FROM t ORDER BY x": [19],
    "SELECT b FROM t UNION SELECT current_user ORDER BY b": [25],
    "SELECT 'a' AS x UNION SELECT 'b' UNION SELECT current_user ORDER BY x": [25],
    "SELECT LOCALTIMESTAMP AS x UNION SELECT LOCALTIMESTAMP(2)": [1114],
    "SELECT LOCALTIMESTAMP AS x UNION SELECT now()": [1184],
    "SELECT u FROM v UNION SELECT current_role": [19],
    "SELECT date_trunc('minute', LOCALTIMESTAMP) AS d, date_trunc('day', l) AS e FROM v": [
        1114,
        1114,
    ],
    "SELECT date_trunc('minute', CURRENT_TIMESTAMP) AS d": [1184],
    "SELECT max(LOCALTIMESTAMP) AS a, min(l) AS b, max(current_user) AS c FROM v": [1114, 1114, 25],
    "SELECT coalesce(current_user, 'x') AS a, coalesce(u, b) AS b, coalesce(b, u) AS c FROM v": [
        19,
        19,
        25,
    ],
    "SELECT nullif(current_user, 'x') AS a, CASE WHEN true THEN current_user END AS b": [19, 19],
    "SELECT CASE WHEN false THEN LOCALTIMESTAMP ELSE LOCALTIMESTAMP(0) END AS a,"
    " CASE WHEN true THEN LOCALTIMESTAMP ELSE now() END AS b": [1114, 1184],
    "SELECT x || '' AS a, x::text AS b FROM (SELECT current_user AS x) s": [25, 25],
    "SELECT (SELECT u FROM v) AS a, (SELECT l FROM v WHERE v.b = t.b) AS b FROM t": [19, 1114],
    "SELECT count(*) AS n, (SELECT (SELECT max(l) FROM v)) AS m FROM t": [20, 1114],
    "SELECT nullif(LOCALTIMESTAMP, now()) AS a, nullif(u, b) AS b, nullif(b, u) AS c FROM v": [
        1114,
        19,
        25,
    ],
    "VALUES (LOCALTIMESTAMP, 1), (NULL, 2)": [1114, 23],
    "VALUES ('a'), (current_user) ORDER BY 1": [19],
    "SELECT x FROM (VALUES (current_user), (NULL)) s (x)": [19],
}


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair(*SETUP) as pair:
        yield pair


@pytest.mark.parametrize(("binary", "prepare"), [(False, False), (True, False), (True, True)])
def test_the_types_are_carried_as_postgresql_carries_them(
    both, binary: bool, prepare: bool
) -> None:
    theirs, ours = both
    for sql, oids in CARRIED.items():
        answers = []
        for conn in (theirs, ours):
            cursor = conn.cursor(binary=binary)
            cursor.execute(sql, prepare=prepare)
            types = [c.type_code for c in cursor.description or ()]
            zones = [
                [v.tzinfo is None for v in row if isinstance(v, datetime)]
                for row in cursor.fetchall()
            ]
            answers.append((types, zones))
        assert answers[0][0] == oids, f"PostgreSQL: {sql}"
        assert answers[1] == answers[0], (
            f"{sql}\n  PostgreSQL: {answers[0]}\n  refimpl: {answers[1]}"
        )


# Each statement and the type modifiers both must give its columns.
PRECISE = {
    "SELECT CURRENT_TIMESTAMP(3), LOCALTIMESTAMP(0), LOCALTIMESTAMP, now()": [3, 0, -1, -1],
    "SELECT l, c FROM w": [3, 1],
    "SELECT x FROM (SELECT LOCALTIMESTAMP(2) AS x) s": [2],
    "WITH c(x) AS (SELECT CURRENT_TIMESTAMP(4)) SELECT x FROM c": [4],
    "SELECT (SELECT LOCALTIMESTAMP(3)) AS x": [3],
    "SELECT (SELECT l FROM w) AS x, (SELECT c FROM w) AS y, (SELECT max(l) FROM w) AS z": [
        3,
        1,
        -1,
    ],
    "WITH c(x) AS (SELECT CURRENT_TIMESTAMP(4)) SELECT (SELECT x FROM c) AS y": [4],
    "SELECT nullif(l, now()) AS x FROM w": [3],
    "VALUES (LOCALTIMESTAMP(2)), (LOCALTIMESTAMP(2))": [2],
    "VALUES (LOCALTIMESTAMP(2), LOCALTIMESTAMP(2)), (LOCALTIMESTAMP(3), NULL)": [-1, -1],
    "SELECT LOCALTIMESTAMP(3) AS x UNION SELECT LOCALTIMESTAMP(3)": [3],
    "SELECT LOCALTIMESTAMP(3) AS x UNION SELECT LOCALTIMESTAMP(2)": [-1],
    "SELECT coalesce(l, NULL) AS a, CASE WHEN true THEN c END AS b FROM w": [3, 1],
    "SELECT max(l) AS a, date_trunc('day', l) AS b FROM w GROUP BY l": [-1, -1],
    "SELECT a.attname, a.atttypmod, pg_catalog.format_type(a.atttypid, a.atttypmod) AS t"
    " FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
    " WHERE c.relname = 'w' ORDER BY a.attnum": [-1, -1, -1],
}


@pytest.mark.parametrize("binary", [False, True])
def test_a_timestamps_precision_is_sent_as_postgresql_sends_it(both, binary: bool) -> None:
    theirs, ours = both
    for sql, typmods in PRECISE.items():
        answers = []
        for conn in (theirs, ours):
            cursor = conn.cursor(binary=binary)
            cursor.execute(sql)
            result = cursor.pgresult
            assert result is not None
            answers.append([result.fmod(i) for i in range(result.nfields)])
            if "atttypmod" in sql:  # the view's columns: their precision and its name
                answers.append([tuple(row[1:]) for row in cursor.fetchall()])
        half = len(answers) // 2  # PostgreSQL's, then refimpl's
        assert answers[0] == typmods, f"PostgreSQL: {sql}"
        assert answers[half:] == answers[:half], sql
