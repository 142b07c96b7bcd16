"""A CASE's values (spec/types-and-values.md): a text constant among TIMESTAMPs is read as
one, as PostgreSQL reads an `unknown`; text that is no time is an error, and text among
numbers still does not mix."""

from __future__ import annotations

import pytest

from refimpl.engine.session import Session
from refimpl.errors import InvalidValue, TypeMismatch

JAN_2020 = 1577836800000000  # 2020-01-01T00:00:00Z in microseconds


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("SELECT CASE WHEN a = 2 THEN ts ELSE '2020-01-01' END FROM t", JAN_2020),
        ("SELECT CASE a WHEN 1 THEN '2020-01-01' ELSE ts END FROM t", JAN_2020),
        ("SELECT coalesce(NULL, '2020-01-01', ts) FROM t", JAN_2020),
    ],
)
def test_a_text_constant_among_timestamps_is_one(session: Session, sql: str, value: int) -> None:
    session.execute("CREATE TABLE t (a INT, ts TIMESTAMP); INSERT INTO t VALUES (1, NULL)")
    answer = session.execute(sql)
    assert [c.type for c in answer.columns or ()] == ["TIMESTAMP"]
    assert answer.rows == [(value,)]


def test_text_that_is_no_time_or_is_among_numbers_is_refused(session: Session) -> None:
    session.execute("CREATE TABLE t (a INT, ts TIMESTAMP)")
    with pytest.raises(InvalidValue, match="is not a timestamp"):
        session.execute("SELECT CASE WHEN a = 1 THEN ts ELSE 'nope' END FROM t")
    with pytest.raises(TypeMismatch, match="CASE mixes values of types INT, STRING"):
        session.execute("SELECT CASE WHEN a = 1 THEN a ELSE '2020-01-01' END FROM t")
