"""The clock as a session's statements read it (spec/sql.md, "The transaction's time"): now(),
CURRENT_TIMESTAMP, LOCALTIMESTAMP and transaction_timestamp() are the transaction's start,
one value for every statement and row of a BEGIN ... COMMIT block (each statement outside one
is its own transaction); statement_timestamp() is the statement's start; clock_timestamp()
the moment of each call. No plan, cached answer or prepared run carries one transaction's
time into another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.query.cache_keys import deterministic, shareable
from refimpl.engine.query.functions import CLOCK_FUNCTIONS
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.sql.parser import parse_cached

ADMIN = Principal("admin", is_admin=True)
# The spellings of the transaction's start.
TRANSACTION_TIME = ("now()", "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "transaction_timestamp()")


@pytest.fixture
def admin(instance: Instance) -> Iterator[Session]:
    opened = instance.session("demo", ADMIN)
    opened.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, ts TIMESTAMP)")
    yield opened
    opened.close()


def micros_now() -> int:
    return time.time_ns() // 1000


def one(session: Session, sql: str) -> Any:
    ((value,),) = session.execute(sql).rows
    return value


# -- one transaction, one now() -----------------------------------------------------------

# Statements of a transaction, each answering the values of now() it saw or wrote (the
# table's `ts` column holds only values written by now() and its spellings).
STATEMENTS = st.sampled_from(
    [
        "INSERT INTO t SELECT coalesce(max(id), 0) + 1, {now} FROM t",
        "INSERT INTO t SELECT coalesce(max(id), 0) + 1, {now} FROM t;"
        " INSERT INTO t SELECT max(id) + 1, {now} FROM t",
        "UPDATE t SET ts = {now}",
        "UPDATE t SET ts = {now} WHERE ts <= {now} RETURNING ts",
        "SELECT {now} AS x FROM t",
        "SELECT {now} AS x, id FROM t WHERE id = 1",
        "SELECT {now} AS x",
        "DELETE FROM t WHERE ts < {now} RETURNING ts",
    ]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    statements=st.lists(st.tuples(STATEMENTS, st.sampled_from(TRANSACTION_TIME)), max_size=8),
    rows=st.integers(min_value=1, max_value=4),
)
def test_every_row_and_statement_of_a_transaction_sees_one_now(
    admin: Session, statements: list[tuple[str, str]], rows: int
) -> None:
    admin.execute("DELETE FROM t")
    began = micros_now()
    admin.execute("BEGIN")
    start = one(admin, "SELECT now()")
    assert isinstance(start, int) and start >= began
    values = ", ".join(f"({n}, now())" for n in range(100, 100 + rows))
    admin.execute(f"INSERT INTO t VALUES {values}")  # one VALUES list, one moment
    statement_times = []
    for sql, now in statements:
        answer = admin.execute(sql.format(now=now))
        assert {row[0] for row in answer.rows} <= {start}, (sql, now)
        statement_times.append(one(admin, "SELECT statement_timestamp()"))
    assert {ts for (ts,) in admin.execute("SELECT ts FROM t").rows} == {start}
    admin.execute("COMMIT")
    # Each statement has its own start, after the transaction's.
    assert statement_times == sorted(statement_times)
    assert all(at > start for at in statement_times)
    # Outside a block each statement is its own transaction: now() is its start.
    after, its_start = admin.execute("SELECT now(), statement_timestamp()").rows[0]
    assert after == its_start > start


def test_outside_a_block_each_statement_has_its_own_now(admin: Session) -> None:
    admin.execute("INSERT INTO t VALUES (1, now()), (2, CURRENT_TIMESTAMP)")
    time.sleep(0.002)
    admin.execute("INSERT INTO t VALUES (3, transaction_timestamp())")
    first, second, third = (ts for (ts,) in admin.execute("SELECT ts FROM t ORDER BY id").rows)
    assert first == second < third


def test_statement_and_clock_timestamps_move_inside_a_transaction(admin: Session) -> None:
    admin.execute("INSERT INTO t VALUES (1, now()), (2, now()), (3, now())")
    admin.execute("BEGIN")
    time.sleep(0.002)
    answer = admin.execute(
        "SELECT now() AS n, statement_timestamp() AS s, clock_timestamp() AS c FROM t ORDER BY id"
    ).rows
    (start,) = {n for n, _, _ in answer}
    (statement,) = {s for _, s, _ in answer}  # one for the whole statement
    clocks = [c for _, _, c in answer]
    assert start < statement <= clocks[0] <= clocks[1] <= clocks[2]
    time.sleep(0.002)
    assert one(admin, "SELECT statement_timestamp()") > statement
    assert one(admin, "SELECT transaction_timestamp()") == start
    admin.execute("ROLLBACK")
    time.sleep(0.002)
    assert one(admin, "SELECT now()") > start  # the block's time ended with it


def test_a_trigger_and_a_procedure_see_their_callers_transaction_time(admin: Session) -> None:
    admin.execute("CREATE TABLE audit (id BIGINT, at TIMESTAMP)")
    admin.execute(
        "CREATE TRIGGER a AFTER INSERT ON t BEGIN INSERT INTO audit VALUES (NEW.id, now()); END"
    )
    admin.execute(
        "CREATE PROCEDURE stamp(n BIGINT) LANGUAGE SQL AS"
        " $$ INSERT INTO audit VALUES (n, CURRENT_TIMESTAMP) $$"
    )
    admin.execute("BEGIN")
    start = one(admin, "SELECT now()")
    time.sleep(0.002)
    admin.execute("INSERT INTO t VALUES (1, '2020-01-01')")
    time.sleep(0.002)
    admin.execute("CALL stamp(2)")
    admin.execute("COMMIT")
    assert admin.execute("SELECT id, at FROM audit ORDER BY id").rows == [(1, start), (2, start)]


def test_a_failed_transaction_keeps_its_time_until_it_ends(admin: Session) -> None:
    admin.keeps_failed = True
    admin.execute("BEGIN")
    start = one(admin, "SELECT now()")
    with pytest.raises(Exception):  # noqa: B017 - any statement error fails the transaction
        admin.execute("SELECT nope FROM t")
    admin.execute("ROLLBACK")
    time.sleep(0.002)
    assert one(admin, "SELECT now()") > start


# -- nothing kept carries one transaction's time into another -----------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT now() AS x FROM t",  # a table SELECT: its plan, the result cache
        "SELECT now() AS x, id FROM t WHERE id = 1",  # a point read's plan
        "SELECT CURRENT_TIMESTAMP AS x",  # a SELECT without FROM: its kept plans
        "SELECT statement_timestamp() AS x",  # a function of the session
        "SELECT transaction_timestamp() AS x FROM t WHERE ts < now()",
    ],
)
def test_each_transaction_reads_its_own_time_whatever_was_kept(admin: Session, sql: str) -> None:
    admin.execute("INSERT INTO t VALUES (1, '2020-01-01')")
    seen = []
    for _ in range(3):
        admin.execute("BEGIN")
        (first,) = {row[0] for row in admin.execute(sql).rows}
        time.sleep(0.002)
        prepared = admin.prepare(sql)
        assert prepared is not None
        (again,) = {row[0] for row in admin.run_prepared(prepared, ()).rows}
        if "statement_timestamp" in sql:
            assert again > first
        else:
            assert again == first
        admin.execute("COMMIT")
        seen.append(first)
        time.sleep(0.002)
    assert seen == sorted(set(seen))  # three transactions, three times


@pytest.mark.parametrize("name", sorted(CLOCK_FUNCTIONS))
def test_no_clock_function_is_kept_for_another_caller_or_run(name: str) -> None:
    call = name.upper() if name in ("current_timestamp", "localtimestamp") else f"{name}()"
    (select,) = parse_cached(f"SELECT {call} AS x, id FROM t").statements
    assert not deterministic(select)  # never a cached answer, a where= of a feed
    assert not shareable(select)  # nor a live answer shared between subscribers
