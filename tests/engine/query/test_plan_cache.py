"""A SELECT run from the database's plan cache answers exactly as one compiled afresh, across
schema changes (ALTER ADD/DROP COLUMN, DROP and CREATE of the same name, views), parameters
and errors."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import KdbError

CREATE = "CREATE TABLE t (id BIGINT PRIMARY KEY, g STRING, v DOUBLE)"
QUERIES = [
    "SELECT * FROM t WHERE v > ? ORDER BY id",
    "SELECT g, count(*), sum(v), max(id) FROM t WHERE id >= ? GROUP BY g ORDER BY g",
    "SELECT g, avg(v) AS a FROM t GROUP BY g HAVING count(*) > ? ORDER BY a DESC",
    "SELECT id, v * ? AS w FROM t WHERE g = 'a' OR id = ? ORDER BY w LIMIT 3",
    "SELECT x, count(*) FROM t GROUP BY x",
    "SELECT DISTINCT g FROM t ORDER BY 1",
    "SELECT count(*) FROM t WHERE id = ?",
    "SELECT * FROM w WHERE id > ?",
    "SELECT g, sum(v) FROM w GROUP BY g",
    "SELECT 1 + ?, 'x'",
]
CHANGES = [
    CREATE,
    "ALTER TABLE t ADD COLUMN x INT",
    "ALTER TABLE t DROP COLUMN v",
    "ALTER TABLE t DROP COLUMN x",
    "DROP TABLE t",
    "CREATE TABLE t (id BIGINT PRIMARY KEY, g STRING, v DOUBLE, x STRING)",
    "CREATE VIEW w AS SELECT id, g, v FROM t WHERE id > 0",
    "DROP VIEW w",
    "INSERT INTO t (id, g, v) VALUES (?, 'a', 1.5)",
    "INSERT INTO t (id, g, v) VALUES (?, 'b', -2.0)",
]
PARAMS = st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.sampled_from(["a", "1", None]))
STEPS = st.lists(
    st.tuples(st.integers(0, len(CHANGES) - 1), st.integers(-5, 5), st.tuples(PARAMS, PARAMS)),
    max_size=12,
)


def outcome(connection: refimpl.Connection, sql: str, params: tuple) -> object:
    try:
        result = connection.execute(sql, params)
    except KdbError as error:
        return ("error", type(error).__name__, str(error))
    return ("ok", [(c.name, c.type) for c in result.columns or []], result.rows)


def parameters(sql: str, given: tuple) -> tuple:
    return given[: sql.count("?")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_cached_plans_answer_as_fresh_ones(steps):
    with tempfile.TemporaryDirectory() as folder:
        # No result cache on either side: every SELECT runs a plan.
        options = refimpl.EngineOptions(result_cache_bytes=0)
        cached = refimpl.connect(Path(folder) / "cached", options=options)
        fresh = refimpl.connect(Path(folder) / "fresh", options=options)
        fresh.instance.database(fresh.database).plan_cache = PlanCache(0)  # keeps nothing
        try:
            for connection in (cached, fresh):
                connection.execute(CREATE)
                connection.execute("INSERT INTO t VALUES (1, 'a', 0.5), (2, 'b', 1.5)")
            # After each change every query runs on both sides, and twice on the cached
            # side: the second run reuses the plan the first one kept.
            for change, value, given_params in steps:
                for sql in QUERIES:
                    params = parameters(sql, given_params)
                    answers = [outcome(c, sql, params) for c in (cached, fresh)]
                    assert answers[0] == answers[1], (sql, params)
                    assert outcome(cached, sql, params) == answers[1], (sql, params)
                sql = CHANGES[change]
                params = parameters(sql, (value,))
                assert outcome(cached, sql, params) == outcome(fresh, sql, params), sql
        finally:
            cached.close()
            fresh.close()


def test_a_repeated_select_compiles_once(tmp_path):
    connection = refimpl.connect(
        tmp_path / "data", options=refimpl.EngineOptions(result_cache_bytes=0)
    )
    try:
        connection.execute(CREATE)
        plans = connection.instance.database(connection.database).plan_cache
        sql = "SELECT g, count(*) FROM t GROUP BY g"
        connection.execute(sql)
        misses = plans.misses
        for _ in range(3):
            connection.execute(sql)
        assert plans.misses == misses
        connection.execute("ALTER TABLE t ADD COLUMN x INT")
        connection.execute(sql)
        assert plans.misses > misses  # a new schema object: planned again, then kept
        misses = plans.misses
        connection.execute(sql)
        assert plans.misses == misses
    finally:
        connection.close()


def test_the_cache_is_bounded():
    plans = PlanCache(2)
    version = object()
    for key in range(5):
        plans.put(key, version, str(key))
    assert len(plans) == 2
    assert plans.get(4, version) == "4" and plans.get(0, version) is None
    assert plans.get(4, object()) is None  # another schema object: not this plan
