"""Templated parsing: a statement run from its shared template answers as written."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.statements import executor
from refimpl.sql import ast
from refimpl.sql.parser import parse
from refimpl.sql.templates import templated

numbers = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32).filter(lambda f: abs(f) < 1e12),
)
texts = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)


def sql_number(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    connection = refimpl.connect(tmp_path_factory.mktemp("templates"))
    connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, x DOUBLE, s STRING)")
    yield connection.session()
    connection.close()


def as_written(session, text: str):
    statement = parse(text).statements[0]
    return executor.execute(session, statement, text, ())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=st.integers(0, 10**9), x=numbers, s=texts, low=numbers)
def test_template_answers_as_written(session, key, x, s, low):
    insert = f"INSERT INTO t VALUES ({key}, {sql_number(x)}, {sql_text(s)})"
    shared = templated(insert)
    assert shared is not None and shared.script.sources == (insert,)
    session.execute("BEGIN")
    try:
        session.execute(insert)
        query = (
            f"SELECT id, x, s, x > {sql_number(low)} AS above FROM t"
            f" WHERE id = {key} AND s = {sql_text(s)} AND x >= {sql_number(low)} - 1e13"
        )
        assert templated(query) is not None
        assert session.execute(query).rows == as_written(session, query).rows
        assert session.execute(query).columns == as_written(session, query).columns
    finally:
        session.execute("ROLLBACK")


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "SELECT a FROM t WHERE b = ?",
        "INSERT INTO t VALUES (1); SELECT 2",
        "INSERT INTO t SELECT 1, 2, 'x'",
        "SELECT 1 -- a comment",
        "CREATE TABLE x (id INT)",
    ],
)
def test_texts_that_are_parsed_as_written(text):
    assert templated(text) is None


def test_column_positions_after_order_by_stay_positions():
    shared = templated("SELECT s, id FROM t WHERE id > 3 ORDER BY 2 DESC")
    assert shared is not None and shared.params == (3,)
    select = shared.script.statements[0]
    assert isinstance(select, ast.Select)
    position = select.order_by[0].expr
    assert isinstance(position, ast.Literal) and position.value == 2
