"""A side of a set operation whose column is written as NULL takes the other side's type,
as PostgreSQL's `unknown` does (spec/queries.md, "UNION, INTERSECT, EXCEPT"); a NULL read
from a subquery or a set operation inside is text by then, and mixes with no number."""

from __future__ import annotations

import pytest

from refimpl.engine.session import Session
from refimpl.errors import TypeMismatch


@pytest.mark.parametrize(
    ("sql", "types", "rows"),
    [
        ("SELECT 1 UNION ALL SELECT NULL", ["INT"], [(1,), (None,)]),
        ("SELECT NULL AS x UNION ALL SELECT 2.5", ["DOUBLE"], [(None,), (2.5,)]),
        (
            "SELECT 1, NULL UNION ALL SELECT NULL, true",
            ["INT", "BOOLEAN"],
            [(1, None), (None, True)],
        ),
        ("SELECT a FROM t INTERSECT SELECT NULL", ["INT"], []),
        ("SELECT a FROM t EXCEPT SELECT NULL", ["INT"], [(1,)]),
        (
            "SELECT a FROM t UNION ALL SELECT NULL UNION ALL SELECT NULL",
            ["INT"],
            [(1,), (None,), (None,)],
        ),
        ("WITH c AS (SELECT 1) SELECT NULL UNION ALL SELECT a FROM t", ["INT"], [(None,), (1,)]),
        ("SELECT NULL UNION SELECT NULL", ["STRING"], [(None,)]),
    ],
)
def test_a_null_written_on_one_side_takes_the_others_type(
    session: Session, sql: str, types: list[str], rows: list[tuple]
) -> None:
    session.execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1)")
    answer = session.execute(sql)
    assert [c.type for c in answer.columns or ()] == types
    assert answer.rows == rows


def test_a_timestamp_and_a_null_are_a_timestamp_on_either_side(session: Session) -> None:
    for sql in ("SELECT now() UNION ALL SELECT NULL", "SELECT NULL UNION ALL SELECT now()"):
        answer = session.execute(sql)
        assert [c.type for c in answer.columns or ()] == ["TIMESTAMP"]
        assert sorted(answer.rows, key=lambda row: row[0] is None)[1] == (None,)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x FROM (SELECT NULL AS x) s UNION SELECT 1",
        "SELECT NULL UNION SELECT NULL UNION SELECT 1",
        "SELECT 'a' UNION SELECT 1",
    ],
)
def test_a_null_typed_before_the_set_operation_is_text(session: Session, sql: str) -> None:
    with pytest.raises(TypeMismatch, match="UNION mixes values of types INT, STRING"):
        session.execute(sql)
