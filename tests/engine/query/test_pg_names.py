"""The PostgreSQL types a result column keeps where its column type does not say them
(`Column.pg_type`, spec/pgwire.md "Types"): the session's names are `name` and
LOCALTIMESTAMP `timestamp`, through a subquery, a view, a WITH table, a join, a set
operation and a scalar subquery, and into the functions that keep their argument's type;
the column type (what /exec says) stays STRING or TIMESTAMP."""

from __future__ import annotations

import pytest

from refimpl.engine.session import Session

CASES = [
    ("SELECT x, n FROM (SELECT current_user AS x, 1 AS n) s", [("STRING", "name"), ("INT", None)]),
    ("SELECT * FROM v", [("STRING", "name"), ("TIMESTAMP", "timestamp"), ("STRING", None)]),
    ("SELECT v.u, t.b FROM v JOIN t ON t.b = v.b", [("STRING", "name"), ("STRING", None)]),
    ("WITH c(z) AS (SELECT LOCALTIMESTAMP) SELECT z FROM c", [("TIMESTAMP", "timestamp")]),
    ("SELECT u, count(*) FROM v GROUP BY u", [("STRING", "name"), ("BIGINT", None)]),
    ("SELECT max(l), min(u) FROM v", [("TIMESTAMP", "timestamp"), ("STRING", None)]),
    ("SELECT (SELECT current_user) AS x", [("STRING", "name")]),
    ("SELECT (SELECT u FROM v), (SELECT l FROM v WHERE v.b = t.b) FROM t",
     [("STRING", "name"), ("TIMESTAMP", "timestamp")]),
    ("SELECT count(*), (SELECT (SELECT u FROM v)) FROM t", [("BIGINT", None), ("STRING", "name")]),
    ("SELECT nullif(l, now()), nullif('x', u), nullif(b, u) FROM v",
     [("TIMESTAMP", "timestamp"), ("STRING", "name"), ("STRING", None)]),
    ("VALUES (LOCALTIMESTAMP, 1), (NULL, 2)", [("TIMESTAMP", "timestamp"), ("INT", None)]),
    ("VALUES ('a'), (current_user)", [("STRING", "name")]),
    ("SELECT x FROM (VALUES (current_user), (NULL)) s (x)", [("STRING", "name")]),
    ("SELECT current_user UNION SELECT 'a'", [("STRING", "name")]),
    ("SELECT NULL AS x UNION SELECT u FROM v", [("STRING", "name")]),
    ("SELECT b FROM t UNION SELECT current_user", [("STRING", None)]),
    ("SELECT current_user UNION SELECT b FROM t", [("STRING", "name")]),  # the first side's
    ("SELECT LOCALTIMESTAMP UNION SELECT now()", [("TIMESTAMP", None)]),  # timestamptz
    ("SELECT date_trunc('hour', l), date_trunc('hour', now()) FROM v",
     [("TIMESTAMP", "timestamp"), ("TIMESTAMP", None)]),
    ("SELECT coalesce(u, 'x'), coalesce(b, u), CASE WHEN true THEN l END FROM v",
     [("STRING", "name"), ("STRING", None), ("TIMESTAMP", "timestamp")]),
    # An operator or a cast is typed as this engine types it (text in PostgreSQL too).
    ("SELECT u || '', CAST(u AS TEXT), length(u) FROM v",
     [("STRING", None), ("STRING", None), ("INT", None)]),
    # A USING column of a name and a text is no `name`.
    ("SELECT x FROM (SELECT current_user AS x) s JOIN (SELECT b AS x FROM t) r USING (x)",
     [("STRING", None)]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "expected"), CASES)
def test_a_columns_postgresql_type_is_carried(session: Session, sql: str, expected: list) -> None:
    session.execute(
        "CREATE TABLE t (a INT, b STRING); INSERT INTO t VALUES (1, 'admin');"
        " CREATE VIEW v AS SELECT current_user AS u, LOCALTIMESTAMP AS l, b FROM t"
    )
    columns = session.execute(sql).columns or []
    assert [(c.type, c.pg_type) for c in columns] == expected


TYPMODS = [
    ("SELECT CURRENT_TIMESTAMP(3), LOCALTIMESTAMP(0), LOCALTIMESTAMP, now()", [3, 0, -1, -1]),
    ("SELECT l, c FROM w", [3, 1]),
    ("SELECT x FROM (SELECT LOCALTIMESTAMP(2) AS x) s", [2]),
    # A scalar subquery's column is the column it answered: read from c, c's.
    ("WITH c(x) AS (SELECT CURRENT_TIMESTAMP(4)) SELECT x, (SELECT x FROM c) AS y FROM c", [4, 4]),
    ("SELECT (SELECT l FROM w), (SELECT max(l) FROM w), nullif(l, now()) FROM w GROUP BY l",
     [3, -1, 3]),
    ("VALUES (LOCALTIMESTAMP(2)), (LOCALTIMESTAMP(2))", [2]),
    ("VALUES (LOCALTIMESTAMP(2), LOCALTIMESTAMP(2)), (LOCALTIMESTAMP(3), NULL)", [-1, -1]),
    ("SELECT (SELECT LOCALTIMESTAMP(3)) AS x", [3]),
    ("SELECT LOCALTIMESTAMP(3) UNION SELECT LOCALTIMESTAMP(3)", [3]),
    ("SELECT LOCALTIMESTAMP(3) UNION SELECT LOCALTIMESTAMP(2)", [-1]),
    ("SELECT coalesce(l, NULL), CASE WHEN true THEN c END, coalesce(l, LOCALTIMESTAMP),"
     " nullif(l, NULL) FROM w", [3, 1, -1, 3]),
    # A function's answer, an aggregate's, and a column that is no TIMESTAMP have none.
    ("SELECT max(l), min(c) FROM w", [-1, -1]),
    ("SELECT date_trunc('day', l), 3 AS n FROM w", [-1, -1]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "expected"), TYPMODS)
def test_a_timestamps_precision_is_its_type_modifier(
    session: Session, sql: str, expected: list
) -> None:
    session.execute("CREATE VIEW w AS SELECT LOCALTIMESTAMP(3) AS l, CURRENT_TIMESTAMP(1) AS c")
    columns = session.execute(sql).columns or []
    assert [c.pg_typmod for c in columns] == expected


def test_a_case_is_named_by_its_else_where_postgresql_names_it_so(session: Session) -> None:
    """PostgreSQL's FigureColname: a CASE takes its ELSE's name when that is a column's,
    a function's, ... (not a constant's, a cast type's or an inner CASE's own `case`)."""
    session.execute("CREATE TABLE t (a INT, b STRING)")
    columns = session.execute(
        "SELECT CASE WHEN true THEN 1 ELSE a END, CASE WHEN true THEN 1 ELSE 2 END,"
        " CASE WHEN true THEN 'x' ELSE CASE WHEN false THEN 'y' ELSE b END END,"
        " CASE WHEN true THEN 'x' ELSE 5::text END, CASE a WHEN 1 THEN 'one' ELSE lower(b) END,"
        " (CASE WHEN true THEN 'a' END)::text, CASE WHEN true THEN 1 END FROM t"
    ).columns
    assert [c.pg_name or c.name for c in columns or []] == [
        "a", "case", "b", "case", "lower", "text", "case",
    ]  # fmt: skip
