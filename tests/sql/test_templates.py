"""Templated parsing: a statement run from its shared template answers as written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
import refimpl.errors
from refimpl.engine.statements import executor
from refimpl.sql import ast, templates
from refimpl.sql.parser import parse
from refimpl.sql.templates import templated
from tests.hypothesis_settings import OVER_FIXTURE

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


@settings(OVER_FIXTURE, max_examples=60)
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


# Pieces of statement text, and constants to put between them: the characters that decide
# what the scan takes (quotes, digits, points, exponents, words touching constants, a
# non-ASCII digit and letter, comments, quoted names, ? and ;).
_BETWEEN = st.one_of(
    st.sampled_from(
        ["SELECT * FROM t WHERE ", "INSERT INTO t VALUES (", "UPDATE t SET x = 1 WHERE "]
        + ["DELETE FROM t WHERE ", "WHERE", "VALUES", "ORDER BY", "GROUP", "HAVING", "SELECT"]
        + [" AND s = ", "t1", "5x", "INTO", '"x\'"', "-- '", "/* ' */", "'5 "]
    ),
    st.text(st.sampled_from(list("'\"-/*;?.5eE_x (),\né\u0663")), min_size=1, max_size=4),
)
_CONSTANTS = st.one_of(
    st.sampled_from(["5", "007", "1.", ".5", "1.5", "1e5", "1E-3", "''", "'x''y'", "'5'"]),
    st.integers(0, 2**70).map(str),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(repr),
    texts.map(sql_text),
)


def _written(shape: list[str | None], constants: list[str]) -> str:
    filled = iter(constants)
    return "".join(next(filled) if piece is None else piece for piece in shape)


@settings(max_examples=1000, deadline=None)
@given(
    shape=st.lists(st.one_of(_BETWEEN, st.none()), min_size=1, max_size=12),
    fills=st.lists(st.lists(_CONSTANTS, min_size=12, max_size=12), min_size=2, max_size=3),
)
def test_a_text_is_templated_by_its_shape_as_by_its_scan(shape, fills):
    """`template_of`, which remembers by shape (the text, its constants each a `?`) whether
    every constant is a parameter, finds what the scan of the text alone finds: the same
    template and the same values of the same types, for the first text of a shape and the
    next ones (bad values included: they reach the parse and its errors as before)."""
    for constants in fills:
        text = _written(shape, constants)
        expected = templates._scanned(text)
        got = templates.template_of(text)
        assert got == expected
        if got is not None and expected is not None:
            assert [type(value) for value in got.values] == [
                type(value) for value in expected.values
            ]


def test_a_bad_value_in_a_known_shape_is_refused_as_in_a_new_one(session):
    """An INSERT of a shape seen before with a value its column refuses fails with the error
    the same text gets when its shape is new."""
    bad = "INSERT INTO t VALUES (99999999999999999999, 1.5, 'a')"
    templates._shape_verdict.cache_clear()
    with pytest.raises(refimpl.errors.KdbError) as new:
        session.execute(bad)
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (1, 1.5, 'a')")
    session.execute("ROLLBACK")
    with pytest.raises(refimpl.errors.KdbError) as known:
        session.execute(bad)
    assert (type(known.value), str(known.value)) == (type(new.value), str(new.value))
