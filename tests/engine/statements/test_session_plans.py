"""A SELECT without FROM calling the session's functions (`version()`, `current_user()`,
`current_setting`, `kdb_rev`) is compiled once and kept for every session: its calls find
the session of each run when they run, so no run answers another's caller, rights or
revisions."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.errors import Forbidden, KdbError, UnknownTable

ADMIN = Principal("admin", is_admin=True)


@pytest.fixture
def admin(instance: Instance) -> Iterator[Session]:
    opened = instance.session("demo", ADMIN)
    opened.execute("CREATE TABLE t (id BIGINT PRIMARY KEY); CREATE USER u; CREATE USER v")
    opened.execute("GRANT SELECT ON t TO u")
    yield opened
    opened.close()


def test_a_select_of_session_functions_compiles_once(instance, admin, users):
    cache = instance.database("demo").plan_cache
    sql = "SELECT version(), current_setting('server_version_num'), current_user()"
    admin.execute(sql)
    misses = cache.misses
    for session in (admin, *users, admin):
        assert session.execute(sql).rows[0][2] == session.principal.name
    assert cache.misses == misses


def test_rights_are_checked_at_every_run_of_a_kept_plan(admin, users):
    u, v = users
    sql = "SELECT kdb_rev('t')"
    u.execute(sql)
    with pytest.raises(Forbidden):
        v.execute(sql)  # u's run kept the plan, not u's rights
    admin.execute("GRANT SELECT ON t TO v; REVOKE SELECT ON t FROM u")
    v.execute(sql)
    with pytest.raises(Forbidden):
        u.execute(sql)


def test_revisions_and_tables_are_read_at_every_run(admin, users):
    u, _ = users
    sql = "SELECT kdb_rev('t'), kdb_rev('t', 1)"
    before = u.execute(sql).rows
    admin.execute("INSERT INTO t VALUES (1)")
    after = u.execute(sql).rows
    assert after[0][0] != before[0][0] and after[0][1] != before[0][1]
    admin.execute("DROP TABLE t")
    with pytest.raises(UnknownTable):
        admin.execute(sql)


def test_runs_in_several_threads_each_answer_their_own_caller(admin, users):
    sql = "SELECT current_user(), version()"
    wrong: list[object] = []
    start = threading.Barrier(2)

    def run(session: Session) -> None:
        start.wait()
        for _ in range(300):
            name = session.execute(sql).rows[0][0]
            if name != session.principal.name:
                wrong.append(name)

    threads = [threading.Thread(target=run, args=(s,)) for s in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


# Statements of the session's functions, and what changes between runs.
STATEMENTS = [
    "SELECT current_user(), current_database()",
    "SELECT kdb_rev('t'), kdb_rev('t', 1)",
    "SELECT has_table_privilege('t', 'SELECT'), has_table_privilege('t', 'INSERT')",
    "SELECT to_regclass('t'), pg_relation_size('t')",
    "SELECT version(), current_setting('jit'), current_schema()",
]
CHANGES = [
    "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
    "INSERT INTO t SELECT max(id) + 1 FROM t",
    "GRANT SELECT ON t TO v",
    "REVOKE SELECT ON t FROM v",
    "GRANT INSERT ON t TO u",
    "REVOKE INSERT ON t FROM u",
]
STEPS = st.one_of(
    st.tuples(st.just("run"), st.sampled_from(("admin", "u", "v")), st.sampled_from(STATEMENTS)),
    st.tuples(st.just("change"), st.just("admin"), st.sampled_from(CHANGES)),
)


REVISION = re.compile(r"[0-9a-f]{12}\.")


def outcome(session: Session, sql: str) -> object:
    """The answer, a revision's counter kept and its instance's boot id left out."""
    try:
        rows = session.execute(sql).rows
    except KdbError as error:
        return ("error", type(error).__name__, str(error))
    return (
        "ok",
        [tuple(REVISION.sub("", v) if isinstance(v, str) else v for v in r) for r in rows],
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, max_size=25))
def test_kept_plans_answer_every_session_as_fresh_ones(tmp_path_factory, steps):
    folder: Path = tmp_path_factory.mktemp("data")
    cached, fresh = Instance.open(folder / "cached"), Instance.open(folder / "fresh")
    fresh.database("demo").plan_cache = PlanCache(0)  # keeps nothing
    opened: list[Session] = []
    try:
        sessions = []
        for instance in (cached, fresh):
            admin = instance.session("demo", ADMIN)
            admin.execute("CREATE TABLE t (id BIGINT PRIMARY KEY); CREATE USER u; CREATE USER v")
            admin.execute("INSERT INTO t VALUES (5); GRANT SELECT ON t TO u")
            by_name = {"admin": admin}
            by_name |= {name: instance.session("demo", Principal(name)) for name in ("u", "v")}
            opened += by_name.values()
            sessions.append(by_name)
        for _, who, sql in steps:
            answers = [outcome(by_name[who], sql) for by_name in sessions]
            assert answers[0] == answers[1], (who, sql)
    finally:
        for session in opened:
            session.close()
        cached.close()
        fresh.close()
