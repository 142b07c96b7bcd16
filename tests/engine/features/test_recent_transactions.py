"""RecentTransactions: what the event streams of a database read, over a real engine.

Whatever the readers' positions and the order in which they read, `after(lsn)` gives the
log's transactions after `lsn` up to the durable LSN, each once, in order; and a reader that
stops early (at its budget) has had only about what it read decoded, not the whole backlog.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from itertools import islice

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features import recent_transactions
from refimpl.engine.features.recent_transactions import EXTEND_STEP, RecentTransactions


@pytest.fixture
def connection() -> Iterator[refimpl.Connection]:
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, v DOUBLE)")
        yield conn
        conn.close()


def _commit(conn: refimpl.Connection, count: int, first: int) -> None:
    for n in range(first, first + count):
        conn.execute(f"INSERT INTO c VALUES ({n}, {n / 2})")


def _recent(conn: refimpl.Connection, keep: int) -> RecentTransactions:
    database = conn.instance.database(conn.database)
    return RecentTransactions(database, database.name, keep=keep)


def _durable(conn: refimpl.Connection) -> int:
    return conn.instance.database(conn.database).log.durable_lsn


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keep=st.integers(1, 40),
    steps=st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 200), st.integers(0, 60)),
        min_size=1,
        max_size=8,
    ),
)
def test_every_reader_gets_the_log_after_its_place(
    keep: int, steps: list[tuple[int, int, int]]
) -> None:
    """Steps of (commits, a reader's place back from the end, how many it reads): each
    read gives the transactions that follow its place, consecutive, up to the durable LSN."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, v DOUBLE)")
        recent = _recent(conn, keep)
        written = 0
        for commits, back, reads in steps:
            _commit(conn, commits, written)
            written += commits
            durable = _durable(conn)
            at = max(durable - back, 1)
            got = [txn.lsn for txn in islice(recent.after(at), reads)]
            assert got == list(range(at + 1, min(durable, at + reads) + 1))
        conn.close()


def test_a_reader_at_the_end_that_stops_has_only_what_it_read_decoded(
    connection: refimpl.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group of streams behind the end by thousands of commits takes a part (its budget)
    a round: the commits after its part are read and encoded when it reaches them, once."""
    recent = _recent(connection, keep=4096)
    start = _durable(connection)
    list(recent.after(start - 1))  # the reader stands at the end: the kept ones are its
    _commit(connection, 3 * EXTEND_STEP, 0)
    made: list[int] = []
    real = recent_transactions.transaction_events

    def counted(database: str, lsn: int, *args: object, **kwargs: object) -> object:
        made.append(lsn)
        return real(database, lsn, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(recent_transactions, "transaction_events", counted)
    taken = [txn.lsn for txn in islice(recent.after(start), 10)]
    assert taken == list(range(start + 1, start + 11))
    assert len(made) == EXTEND_STEP  # not the 3 * EXTEND_STEP committed
    rest = [txn.lsn for txn in recent.after(start + 10)]
    assert rest == list(range(start + 11, _durable(connection) + 1))
    assert sorted(made) == list(range(start + 1, _durable(connection) + 1))  # each once
