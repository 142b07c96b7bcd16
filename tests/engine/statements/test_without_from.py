"""A SELECT without FROM runs from the database's plan cache once compiled, and only its
plan is kept: every run answers its own parameters, moment, caller, rights and revisions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import Forbidden, KdbError


@pytest.fixture
def admin(instance: Instance) -> Iterator[Session]:
    opened = instance.session("demo", Principal("admin", is_admin=True))
    yield opened
    opened.close()


def plans(instance: Instance) -> PlanCache:
    return instance.database("demo").plan_cache


def test_a_repeated_select_without_from_compiles_once(instance, admin):
    cache = plans(instance)
    assert admin.execute("SELECT 1, 2.5, 'x'").rows == [(1, 2.5, "x")]
    misses, hits = cache.misses, cache.hits
    for _ in range(3):
        assert admin.execute("SELECT 1, 2.5, 'x'").rows == [(1, 2.5, "x")]
    assert (cache.misses, cache.hits) == (misses, hits + 3)
    prepared = admin.prepare("SELECT 1, 2.5, 'x'")
    assert prepared is not None
    assert admin.run_prepared(prepared, ()).rows == [(1, 2.5, "x")]
    assert cache.misses == misses  # a prepared statement finds the same plan


def test_each_run_answers_its_own_parameters(admin):
    prepared = admin.prepare("SELECT ? + 1, upper(?)")
    assert prepared is not None
    assert admin.run_prepared(prepared, (1, "a")).rows == [(2, "A")]
    assert admin.run_prepared(prepared, (41, "b")).rows == [(42, "B")]
    assert admin.run_prepared(prepared, (0.5, "c")).rows == [(1.5, "C")]


def test_now_is_the_moment_of_each_run(admin):
    first = admin.execute("SELECT now()").rows
    time.sleep(0.002)
    assert admin.execute("SELECT now()").rows > first
    first = admin.execute("SELECT now() - now(), 1").rows
    assert admin.execute("SELECT now() - now(), 1").rows == first


def test_session_functions_answer_for_their_own_session(instance, admin):
    admin.execute("CREATE TABLE t (id BIGINT PRIMARY KEY); CREATE USER u; CREATE USER v")
    admin.execute("GRANT SELECT ON t TO u")
    u = instance.session("demo", Principal("u"))
    v = instance.session("demo", Principal("v"))
    try:
        for _ in range(2):
            assert u.execute("SELECT current_user()").rows == [("u",)]
            assert v.execute("SELECT current_user()").rows == [("v",)]
        before = u.execute("SELECT kdb_rev('t')").rows
        admin.execute("INSERT INTO t VALUES (1)")
        assert u.execute("SELECT kdb_rev('t')").rows != before  # never a kept value
        with pytest.raises(Forbidden):
            v.execute("SELECT kdb_rev('t')")  # its own rights, though u's ran the text
    finally:
        u.close()
        v.close()


def test_fixed_settings_are_read_at_every_run(admin):
    sql = "SELECT current_setting('server_encoding'), current_setting('jit')"
    for _ in range(2):
        assert admin.execute(sql).rows == [("UTF8", "off")]


def test_set_returning_and_windows_keep_their_own_path(admin):
    for _ in range(2):
        assert admin.execute("SELECT unnest(ARRAY[1, 2]) AS x").rows == [(1,), (2,)]
        assert admin.execute("SELECT generate_series(1, 3)").rows == [(1,), (2,), (3,)]
        assert admin.execute("SELECT 5 AS a, row_number() OVER ()").rows == [(5, 1)]


EXPRESSIONS = [
    "1 + ?",
    "? || 'x'",
    "coalesce(?, 7)",
    "CASE WHEN ? > 0 THEN 'p' ELSE 'n' END",
    "abs(?) * 2",
    "? IS NULL",
    "round(?)",
]
VALUES = st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.sampled_from(["a", "1", None]))


def outcome(session: Session, sql: str, params: tuple) -> object:
    try:
        result = session.execute(sql, params)
    except KdbError as error:
        return ("error", type(error).__name__, str(error))
    return ("ok", [(c.name, c.type) for c in result.columns or []], result.rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(st.tuples(st.integers(0, len(EXPRESSIONS) - 1), VALUES), max_size=20))
def test_kept_plans_answer_as_fresh_ones(tmp_path_factory, runs):
    folder: Path = tmp_path_factory.mktemp("data")
    cached, fresh = Instance.open(folder / "cached"), Instance.open(folder / "fresh")
    fresh.database("demo").plan_cache = PlanCache(0)  # keeps nothing
    sessions = [i.session("demo", Principal("admin", is_admin=True)) for i in (cached, fresh)]
    try:
        for number, value in runs:
            sql = f"SELECT {EXPRESSIONS[number]}, 'k'"
            answers = [outcome(s, sql, (value,)) for s in sessions]
            assert answers[0] == answers[1], (sql, value)
    finally:
        for session in sessions:
            session.close()
        cached.close()
        fresh.close()
