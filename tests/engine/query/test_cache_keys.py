"""Answers kept for more than one caller (the result cache, live queries' shared answers)
are kept only for statements whose answer is the same for every session (the
result cache in spec/revisions.md; shared work in spec/subscribe.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.instance import Instance
from refimpl.engine.query.cache_keys import shareable
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.sql.parser import parse_cached

ADMIN = Principal("admin", is_admin=True)


@pytest.fixture
def users(instance: Instance) -> Iterator[tuple[Session, Session]]:
    admin = instance.session("demo", ADMIN)
    admin.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT); CREATE USER u; CREATE USER v;"
        " GRANT SELECT ON t TO u; GRANT SELECT ON t TO v; INSERT INTO t VALUES (1, 10)"
    )
    u, v = (instance.session("demo", Principal(name)) for name in ("u", "v"))
    yield u, v
    for opened in (u, v, admin):
        opened.close()


# SQL's keywords (`current_user`, `user`, ...) are calls too: spec/sql.md, "Value functions".
CALLER = ["current_user()", "current_user", "user", "current_role", "session_user"]


@pytest.mark.parametrize("caller", CALLER)
def test_each_caller_reads_its_own_answer_through_the_result_cache(users, caller):
    u, v = users
    sql = f"SELECT {caller}, id FROM t"
    for _ in range(3):  # the later runs of each would come from the cache if it kept them
        assert u.execute(sql).rows == [("u", 1)]
        assert v.execute(sql).rows == [("v", 1)]


@pytest.mark.parametrize("caller", CALLER)
def test_a_filter_over_the_callers_name_filters_for_each_caller(users, caller):
    u, v = users
    sql = f"SELECT id FROM t WHERE {caller} = 'u'"
    for _ in range(3):
        assert u.execute(sql).rows == [(1,)]
        assert v.execute(sql).rows == []


@pytest.mark.parametrize("caller", ["current_user()", "user"])
def test_a_live_query_of_the_callers_name_answers_each_subscriber_for_itself(
    instance, users, caller
):
    u, v = users
    manager = instance.subscriptions
    sql = f"SUBSCRIBE SELECT {caller} AS me, v FROM t"
    waits = []
    for session, name in ((u, "u"), (v, "v")):
        snapshot = manager.ask_now(session, sql, None)
        assert snapshot.rows == [(name, 10)]
        step = manager.ask(session, sql, snapshot.id)
        assert isinstance(step, LiveWait)
        step.watch(threading.Event())
        waits.append(step)
    admin = instance.session("demo", ADMIN)
    admin.execute("UPDATE t SET v = 11 WHERE id = 1")
    admin.close()
    replies = [step.attempt() for step in waits]
    assert [r.rows if r is not None else None for r in replies] == [[("u", 11)], [("v", 11)]]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT id, lower('A'), max(v) FROM t GROUP BY id", True),
        ("SELECT date_trunc('minute', ts), first(v) FROM t GROUP BY 1", True),
        ("SELECT current_user(), id FROM t", False),
        ("SELECT id FROM t WHERE has_table_privilege('t', 'SELECT')", False),
        ("SELECT kdb_rev('t'), id FROM t", False),
        ("SELECT now(), id FROM t", False),
        ("SELECT current_user, id FROM t", False),
        ("SELECT id FROM t WHERE user = 'u'", False),
        ("SELECT id FROM t WHERE \"user\" = 'u'", True),  # a column of that name
        ("SELECT session_user, current_catalog, current_schema FROM t", False),
        ("SELECT CURRENT_TIMESTAMP, id FROM t", False),
        ("SELECT id FROM t WHERE ts < localtimestamp(0)", False),
        ("SELECT id FROM t WHERE v IN (SELECT v FROM t WHERE current_user() = 'u')", False),
    ],
)
def test_shareable_only_calls_the_same_for_every_session(sql, expected):
    (statement,) = parse_cached(sql).statements
    assert shareable(statement) is expected
