"""Every join form of PostgreSQL's FROM: parentheses, NATURAL, USING with aliases, joins on
the right side of a join; each answer checked against SQLite's for the same text."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator

import pytest

import refimpl
from refimpl.errors import NotAllowed

SETUP = [
    "CREATE TABLE a (id INT PRIMARY KEY, x INT, v TEXT)",
    "CREATE TABLE b (id INT PRIMARY KEY, x INT, w INT)",
    "CREATE TABLE c (k INT PRIMARY KEY, x INT)",
    "INSERT INTO a VALUES (1, 10, 'p'), (2, 20, 'q'), (3, NULL, 'r')",
    "INSERT INTO b VALUES (1, 10, 5), (2, 30, 6), (4, NULL, 7)",
    "INSERT INTO c VALUES (1, 10), (2, 20), (3, 30)",
]

QUERIES = [
    "SELECT count(*) FROM (a AS p CROSS JOIN a AS q)",
    "SELECT * FROM (a CROSS JOIN b)",
    "SELECT * FROM a NATURAL JOIN b",
    "SELECT * FROM a NATURAL LEFT JOIN b",
    "SELECT * FROM a NATURAL RIGHT JOIN b",
    "SELECT * FROM a NATURAL FULL JOIN b",
    "SELECT * FROM a NATURAL JOIN c",
    "SELECT * FROM (SELECT id AS n FROM a) s NATURAL JOIN (SELECT x AS m FROM b) t",
    "SELECT p.id, q.w FROM a AS p JOIN b AS q USING (id)",
    "SELECT id, p.x, q.x FROM a AS p FULL JOIN b AS q USING (id)",
    "SELECT a.id, b.id, c.k FROM a JOIN (b JOIN c ON b.x = c.x) ON a.id = b.id",
    "SELECT a.id, b.id, c.k FROM a LEFT JOIN (b JOIN c ON b.x = c.x) ON a.id = b.id",
    "SELECT a.id, b.id, c.k FROM (a LEFT JOIN b ON a.x = b.x) LEFT JOIN c ON c.k = b.id",
    "SELECT a.id, c.k FROM ((a JOIN b USING (id))) JOIN c ON c.x = a.x",
    "SELECT a.id, b.id FROM a, (b CROSS JOIN c) WHERE a.id = c.k AND b.id = c.k",
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path_factory.mktemp("joins") / "data")
    for sql in SETUP:
        connection.execute(sql.replace("TEXT", "STRING"))
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def lite() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    for sql in SETUP:
        connection.execute(sql)
    yield connection
    connection.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_join_forms_answer_as_sqlite(db, lite, sql: str) -> None:
    ours = db.execute(sql)
    cursor = lite.execute(sql)
    assert len(ours.columns) == len(cursor.description)
    # SQLite shows NATURAL's common columns where the left side has them, PostgreSQL first:
    # the values of each row are compared, not their order.
    assert Counter(_values(row) for row in ours.rows) == Counter(map(_values, cursor.fetchall()))


def _values(row: tuple) -> tuple:
    return tuple(sorted(row, key=repr))


def test_natural_join_shows_common_columns_once_and_first(db) -> None:
    result = db.execute("SELECT * FROM a NATURAL JOIN b")
    assert [c.name for c in result.columns] == ["id", "x", "v", "w"]
    assert [tuple(r) for r in result.rows] == [(1, 10, "p", 5)]


@pytest.mark.parametrize(
    "sql",
    ["SELECT * FROM a, LATERAL (SELECT a.id) s", "SELECT * FROM a CROSS JOIN LATERAL f(a.id)"],
)
def test_lateral_is_refused_as_not_supported(db, sql: str) -> None:
    with pytest.raises(NotAllowed, match="LATERAL is not supported"):
        db.execute(sql)


@pytest.mark.parametrize(
    ("sql", "count"),
    [
        # A comma binds looser than JOIN (PostgreSQL): a x (b RIGHT JOIN c), 3 x 3 rows.
        ("SELECT count(*) FROM a, b RIGHT JOIN c ON b.x = c.x", 9),
        ("SELECT count(*) FROM a, b FULL JOIN c ON b.x = c.x", 12),
        # USING and NATURAL after a comma resolve their names in the item after it only.
        ("SELECT count(*) FROM a, b JOIN c USING (x)", 6),
        ("SELECT count(*) FROM a, c NATURAL JOIN c AS d", 9),
        # A join inside an outer join keeps the ON conditions that name no table of it.
        ("SELECT count(*) FROM (a JOIN b ON a.id = b.id AND 1 = 0) LEFT JOIN c ON a.x = c.x", 0),
        (
            "SELECT count(*) FROM (a JOIN b ON a.id = b.id AND 9 IN (SELECT k FROM c))"
            " FULL JOIN c ON a.x = c.x",
            3,
        ),
        # An ON may still name a table before the comma (SQLite's reading).
        ("SELECT count(*) FROM a, b JOIN c ON a.x = c.x", 6),
    ],
)
def test_a_comma_binds_looser_than_join(db, sql: str, count: int) -> None:
    assert db.execute(sql).rows == [(count,)]
