"""Point reads answer exactly as the general SELECT path does, errors included."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.query.point_read import point_plan
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import KdbError
from refimpl.sql import ast
from tests.parsed import statement

KEYS = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "'q'"]))
CONSTANTS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "b", "zz"]),
    st.floats(-3, 3),
    st.none(),
    st.booleans(),
)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    connection = refimpl.connect(tmp_path_factory.mktemp("point") / "data")
    connection.execute("CREATE TABLE one (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)")
    connection.execute("CREATE TABLE two (k STRING, n INT, v DOUBLE, PRIMARY KEY (k, n))")
    connection.execute("CREATE TABLE three (k STRING PRIMARY KEY, n INT)")
    connection.execute("INSERT INTO three VALUES ('a', 1), ('b', 2), ('zz', 3)")
    for i in range(-2, 3):
        connection.execute("INSERT INTO one VALUES (?, ?, ?)", (i, i * 0.5, f"r{i}"))
        for k in ("a", "b"):
            connection.execute("INSERT INTO two VALUES (?, ?, ?)", (k, i, i * 1.5))
    yield connection
    connection.close()


def schema(db, table: str):
    return db.instance.database(db.database).tables[table].schema


def answer(db, sql: str, params: tuple) -> object:
    try:
        result = db.execute(sql, params)
    except KdbError as error:
        return type(error).__name__
    return [(c.name, c.type) for c in result.columns], result.rows


SHAPES = [
    ("SELECT * FROM one WHERE id = ?", 1),
    ("SELECT s, id AS ident FROM one WHERE ? = id", 1),
    ("SELECT one.v FROM one WHERE one.id = ?", 1),
    ("SELECT * FROM two WHERE k = ? AND n = ?", 2),
    ("SELECT n, v FROM two t WHERE t.n = ? AND t.k = ?", 2),
    ("SELECT n FROM three WHERE k = ?", 1),  # a key of one text column
    ("SELECT * FROM three WHERE ? = k", 1),
]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.sampled_from(SHAPES), constants=st.lists(CONSTANTS, min_size=2, max_size=2))
def test_point_reads_equal_the_general_path(db, shape, constants):
    sql, count = shape
    params = tuple(constants[:count])
    # `AND 1 = 1` keeps the same meaning but not the point shape: the general path.
    general = sql + " AND 1 = 1"
    assert point_plan(statement(general, ast.Select), schema(db, "one"), PlanCache()) is None
    assert answer(db, sql, params) == answer(db, general, params)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=KEYS)
def test_literal_keys_equal_the_general_path(db, key):
    literal = str(key) if isinstance(key, int) else f"'{key}'"
    for sql in (
        f"SELECT * FROM one WHERE id = {literal}",
        f"SELECT v FROM two WHERE n = 1 AND k = {literal}",
    ):
        assert answer(db, sql, ()) == answer(db, sql + " AND 1 = 1", ())


def test_only_whole_keys_get_a_plan(db):
    two = schema(db, "two")
    planned = "SELECT * FROM two WHERE k = 'a' AND n = 1"
    assert point_plan(statement(planned, ast.Select), two, PlanCache()) is not None
    for sql in (
        "SELECT * FROM two WHERE k = 'a'",
        "SELECT * FROM two WHERE k = 'a' AND n > 1",
        "SELECT * FROM two WHERE k = 'a' AND n = 1 ORDER BY v",
        "SELECT count(*) FROM two WHERE k = 'a' AND n = 1",
        "SELECT v + 1 FROM two WHERE k = 'a' AND n = 1",
        "SELECT * FROM two WHERE k = 'a' AND k = 'b'",
    ):
        assert point_plan(statement(sql, ast.Select), two, PlanCache()) is None, sql


# Point shapes with the type each parameter must have to be read by the plan.
TYPED_SHAPES = [
    ("SELECT * FROM one WHERE id = ?", (st.integers(-3, 3),)),
    (
        "SELECT * FROM two WHERE k = ? AND n = ?",
        (st.sampled_from(["a", "b", "z"]), st.integers(-3, 3)),
    ),
]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_one_plan_serves_every_parameter_value(db, data):
    """The plan is made once per statement and schema, its parameters bound per run: the
    later runs of a prepared statement add no plan, whatever values they bring, and answer
    as the general path does."""
    sql, kinds = data.draw(st.sampled_from(TYPED_SHAPES))
    runs = data.draw(st.lists(st.tuples(*kinds), min_size=2, max_size=6))
    cache = db.instance.database(db.database).plan_cache
    db.execute(sql, runs[0])
    plans = len(cache)
    answers = [answer(db, sql, params) for params in runs[1:]]
    assert len(cache) == plans
    general = sql.replace("WHERE", "WHERE 1 = 1 AND")  # no point plan: compiled per values
    assert answers == [answer(db, general, params) for params in runs[1:]]
