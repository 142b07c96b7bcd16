"""SQL's value functions without parentheses, run (spec/sql.md, "Value functions"): each
caller is answered for itself whatever was kept (result cache, plan cache), the time is the
transaction's start, and they work alike in a SELECT, VALUES, SET, WHERE and RETURNING."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.engine.storage.values import timestamp_to_datetime

ADMIN = Principal("admin", is_admin=True)


@pytest.fixture
def admin(instance: Instance) -> Iterator[Session]:
    opened = instance.session("demo", ADMIN)
    opened.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, owner STRING, ts TIMESTAMP);"
        " CREATE USER u; CREATE USER v; GRANT WRITE ON DATABASE demo TO u;"
        " GRANT WRITE ON DATABASE demo TO v"
    )
    yield opened
    opened.close()


def micros_now() -> int:
    return time.time_ns() // 1000


def test_each_keyword_answers_as_postgresql_names_it(admin):
    answer = admin.execute(
        "SELECT current_user, session_user, current_role, user, current_schema, current_catalog"
    )
    assert [c.name for c in answer.columns] == [
        "current_user",
        "session_user",
        "current_role",
        "user",
        "current_schema",
        "current_catalog",
    ]
    assert [c.type for c in answer.columns] == ["STRING"] * 6
    assert answer.rows == [("admin", "admin", "admin", "admin", "public", "demo")]


def test_two_users_of_one_text_get_their_own_names_from_every_path(users):
    u, v = users
    u.execute("INSERT INTO t VALUES (1, current_user, CURRENT_TIMESTAMP)")
    v.execute("INSERT INTO t VALUES (2, user, now())")
    for _ in range(3):  # a kept plan or answer would give the first caller's name again
        for session, name in ((u, "u"), (v, "v")):
            assert session.execute("SELECT session_user, current_role").rows == [(name, name)]
            assert session.execute("SELECT user AS me, id FROM t ORDER BY id").rows == [
                (name, 1),
                (name, 2),
            ]
            mine = session.execute("SELECT id FROM t WHERE owner = current_user").rows
            assert mine == [(1 if name == "u" else 2,)]
            # A point read, whose plan the database keeps for every caller.
            point = session.execute("SELECT session_user, id FROM t WHERE id = 1").rows
            assert point == [(name, 1)]
    prepared = u.prepare("SELECT current_user, ?")
    assert prepared is not None
    assert u.run_prepared(prepared, (1,)).rows == [("u", 1)]


def test_current_timestamp_is_each_statements_own_time(admin):
    before = micros_now()
    first = admin.execute("SELECT CURRENT_TIMESTAMP AS a, now() AS b, LOCALTIMESTAMP AS c").rows
    (a, b, c) = first[0]
    assert a == b == c and before <= a <= micros_now()
    time.sleep(0.002)
    # Not a kept answer nor a kept plan: the next statement's is later.
    (later,) = admin.execute("SELECT CURRENT_TIMESTAMP").rows[0]
    assert later > a
    admin.execute("INSERT INTO t VALUES (1, 'x', '2026-01-01')")
    (with_table,) = admin.execute("SELECT CURRENT_TIMESTAMP FROM t").rows[0]
    time.sleep(0.002)
    assert admin.execute("SELECT CURRENT_TIMESTAMP FROM t").rows[0][0] > with_table


def test_across_transactions_each_has_its_own_time(admin):
    admin.execute("BEGIN")
    admin.execute("INSERT INTO t VALUES (1, 'x', CURRENT_TIMESTAMP)")
    admin.execute("COMMIT")
    time.sleep(0.002)
    admin.execute("BEGIN")
    admin.execute("INSERT INTO t VALUES (2, 'x', CURRENT_TIMESTAMP)")
    time.sleep(0.002)
    (seen,) = admin.execute("SELECT max(ts) = CURRENT_TIMESTAMP FROM t").rows[0]
    assert seen is True  # the transaction's start, in each of its statements (spec/sql.md)
    admin.execute("COMMIT")
    rows = admin.execute("SELECT ts FROM t ORDER BY id").rows
    assert rows[0][0] < rows[1][0]


def test_a_precision_rounds_as_postgresql_does(admin):
    ((exact, milli, whole),) = admin.execute(
        "SELECT CURRENT_TIMESTAMP, CURRENT_TIMESTAMP(3), LOCALTIMESTAMP(0)"
    ).rows
    assert milli == (exact + 500) // 1000 * 1000
    assert whole == (exact + 500_000) // 1_000_000 * 1_000_000


def test_writes_read_the_statements_time_and_the_callers_name(users):
    u, _ = users
    start = micros_now()
    u.execute("INSERT INTO t VALUES (1, 'nobody', '2000-01-01'), (2, 'nobody', '2000-01-01')")
    updated = u.execute(
        "UPDATE t SET ts = CURRENT_TIMESTAMP, owner = session_user WHERE id = 1"
        " RETURNING id, owner, ts = now() AS same"
    )
    assert updated.rows == [(1, "u", True)]
    ((ts,),) = u.execute("SELECT ts FROM t WHERE id = 1").rows
    assert start <= ts <= micros_now()  # not 1970, as SET's clock was once
    gone = u.execute("DELETE FROM t WHERE ts < CURRENT_TIMESTAMP AND owner <> user RETURNING id")
    assert gone.rows == [(2,)]


def test_drop_partition_where_reads_the_statements_time(admin):
    admin.execute("CREATE TABLE p (ts TIMESTAMP, v INT) TIMESERIES(ts) PARTITION BY DAY")
    day = 86_400_000_000
    admin.execute(f"INSERT INTO p VALUES ('2020-01-01', 1), (now() + {day}, 2)")
    admin.execute("ALTER TABLE p DROP PARTITION WHERE ts < CURRENT_TIMESTAMP")
    assert admin.execute("SELECT v FROM p").rows == [(2,)]


def test_a_timestamp_written_by_current_timestamp_reads_back(admin):
    admin.execute("INSERT INTO t VALUES (1, 'x', CURRENT_TIMESTAMP(0))")
    ((ts,),) = admin.execute("SELECT ts FROM t").rows
    assert timestamp_to_datetime(ts).microsecond == 0
