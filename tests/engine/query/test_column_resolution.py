"""A column named with its table, without it, or in another case is one column: grouping,
HAVING, ORDER BY and DISTINCT resolve every spelling to the column it names (PostgreSQL's
rule)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import refimpl
from refimpl.errors import AmbiguousColumn, SqlError


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path_factory.mktemp("names") / "data")
    connection.execute("CREATE TABLE tab0 (pk INT PRIMARY KEY, col0 INT, col1 DOUBLE, col2 INT)")
    connection.execute("CREATE TABLE tab2 (pk INT PRIMARY KEY, col0 INT, col1 DOUBLE, col2 INT)")
    connection.execute("INSERT INTO tab0 VALUES (1, 2, 3.5, 4), (2, 5, 6.5, 4), (3, NULL, 1, NULL)")
    connection.execute("INSERT INTO tab2 VALUES (1, 2, 3.5, 4), (2, 5, 6.5, 7)")
    yield connection
    connection.close()


def _rows(db: refimpl.Connection, sql: str) -> list[tuple]:
    return [tuple(row) for row in db.execute(sql).rows]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT cor0.col2 * 82 FROM tab0 cor0 GROUP BY col2 ORDER BY 1", [(328,), (None,)]),
        ("SELECT col2 FROM tab2 AS cor0 GROUP BY cor0.col2 ORDER BY 1", [(4,), (7,)]),
        ("SELECT COL2 FROM tab2 GROUP BY tab2.col2 ORDER BY Col2", [(4,), (7,)]),
        ("SELECT NULLIF(cor0.col2, 4) FROM tab0 cor0 GROUP BY col2 ORDER BY 1", [(None,), (None,)]),
        ("SELECT COALESCE(tab0.col2, -1) FROM tab0 GROUP BY col2 ORDER BY 1", [(-1,), (4,)]),
        ("SELECT t.col2 + 1 FROM tab0 t GROUP BY col2 + 1 ORDER BY 1", [(5,), (None,)]),
        ("SELECT col2 FROM tab0 t GROUP BY t.col2 HAVING tab0.col2 > 1", "error"),
        ("SELECT col2 FROM tab0 t GROUP BY t.col2 HAVING t.col2 > 1", [(4,)]),
        (
            "SELECT t.col2, count(*) FROM tab0 t GROUP BY col2 ORDER BY t.col2 DESC",
            [(None, 1), (4, 2)],
        ),
        ("SELECT DISTINCT t.col2 FROM tab0 t ORDER BY col2", [(4,), (None,)]),
        (
            "SELECT a.col2, sum(b.col0) FROM tab0 a JOIN tab2 b ON a.pk = b.pk"
            " GROUP BY a.col2 HAVING sum(b.col0) > 0 ORDER BY col2",
            [(4, 7)],
        ),
        (
            "SELECT a.col2, sum(col0) FROM tab0 a JOIN tab2 b USING (pk)"
            " GROUP BY a.col2 HAVING sum(b.col0) > 0",
            "ambiguous",
        ),
        (
            "SELECT a.col2, sum(b.col0) FROM tab0 a JOIN tab2 b USING (pk)"
            " GROUP BY a.col2 HAVING sum(b.col0) > 0 ORDER BY a.col2",
            [(4, 7)],
        ),
        (
            "SELECT pk, count(*) FROM tab0 a JOIN tab2 b USING (pk) GROUP BY pk ORDER BY pk",
            [(1, 1), (2, 1)],
        ),
    ],
)
def test_a_column_is_one_column_however_named(db, sql: str, expected: object) -> None:
    if expected == "ambiguous":
        with pytest.raises(AmbiguousColumn):
            db.execute(sql)
    elif isinstance(expected, str):
        with pytest.raises(SqlError, match="(?i)group by|tab0"):
            db.execute(sql)
    else:
        assert _rows(db, sql) == expected


def test_a_column_outside_group_by_is_still_refused(db) -> None:
    with pytest.raises(SqlError, match="must appear in GROUP BY"):
        db.execute("SELECT t.col1 FROM tab0 t GROUP BY col2")
    with pytest.raises(SqlError, match="must appear in GROUP BY"):
        db.execute("SELECT col2 + col0 FROM tab0 t GROUP BY t.col2")


def test_answer_columns_keep_the_names_written(db) -> None:
    result = db.execute("SELECT cor0.col2 AS c, col2 FROM tab0 cor0 GROUP BY cor0.col2")
    assert [c.name for c in result.columns] == ["c", "col2"]
