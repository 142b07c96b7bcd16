"""greatest() and least() (spec/types-and-values.md, "Functions"): the largest or smallest
argument that is not NULL, of the arguments' common type; a text constant is read as the
others' type, as a comparison reads it."""

from __future__ import annotations

import pytest

from refimpl.engine.session import Session
from refimpl.errors import SqlError, TypeMismatch


@pytest.mark.parametrize(
    ("sql", "type_", "value"),
    [
        ("SELECT greatest(1, 3, 2)", "INT", 3),
        ("SELECT least(1, NULL, 0)", "INT", 0),
        ("SELECT greatest(1, 2.5)", "DOUBLE", 2.5),
        ("SELECT greatest(3, 2.5)", "DOUBLE", 3.0),
        ("SELECT greatest(1, 2::bigint)", "BIGINT", 2),
        ("SELECT greatest(NULL, NULL)", "NULL", None),
        ("SELECT least('b', 'a', 'c')", "STRING", "a"),
        ("SELECT greatest(1, '5')", "INT", 5),
        ("SELECT greatest(true, false)", "BOOLEAN", True),
        ("SELECT least(ts, '2020-01-01') FROM t", "TIMESTAMP", 1577836800000000),
        ("SELECT greatest(a, b) FROM t", "INT", 7),
        ("SELECT least(a, b, NULL) FROM t", "INT", 4),
    ],
)
def test_the_extreme_argument_that_is_not_null(
    session: Session, sql: str, type_: str, value: object
) -> None:
    session.execute(
        "CREATE TABLE t (a INT, b INT, ts TIMESTAMP);"
        " INSERT INTO t VALUES (4, 7, '2026-01-01T00:00:00Z')"
    )
    answer = session.execute(sql)
    assert [c.type for c in answer.columns or ()] == ["STRING" if type_ == "NULL" else type_]
    assert answer.rows == [(value,)]
    assert type(answer.rows[0][0]) is type(value)


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("SELECT greatest()", SqlError, "greatest\\(\\) needs at least one argument"),
        ("SELECT greatest(1, now())", TypeMismatch, "cannot compare"),
        ("SELECT least(1, 'a')", TypeMismatch, "cannot compare"),
        ("SELECT least('{1}'::int[], '{2}'::int[])", TypeMismatch, "not INT\\[\\]"),
    ],
)
def test_arguments_that_do_not_compare_are_refused(
    session: Session, sql: str, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        session.execute(sql)
