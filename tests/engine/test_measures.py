"""The latency histograms: `observe_alone` (a commit's, under the database's write lock)
counts as `observe` does, and every commit path of a database feeds its commit histogram."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.measures import LATENCY_BOUNDS, LatencyHistogram
from refimpl.engine.session import Session

durations = st.lists(
    st.one_of(
        st.sampled_from(LATENCY_BOUNDS),  # on a bound: counted at or under it
        st.floats(min_value=0.0, max_value=2 * LATENCY_BOUNDS[-1], allow_nan=False),
    )
)


@given(durations)
def test_observed_alone_counts_as_observed(seconds: list[float]) -> None:
    locked, alone = LatencyHistogram(), LatencyHistogram()
    for duration in seconds:
        locked.observe(duration)
        alone.observe_alone(duration)
    assert alone.snapshot() == locked.snapshot()
    assert alone.snapshot().count == len(seconds)


def test_each_commit_is_counted_once_whichever_way_it_commits(session: Session) -> None:
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
    database = session.database
    before = database.measures().commits.count
    prepared = session.prepare("INSERT INTO t VALUES (?, ?)")
    assert prepared is not None
    session.run_prepared(prepared, (1, 0.5))  # one new row, without a transaction's overlay
    session.execute("INSERT INTO t VALUES (2, 1.5), (3, 2.5)")  # the general commit
    session.execute("INSERT INTO t VALUES (4, 3.5)")  # one new row, from a transaction
    session.execute("UPDATE t SET v = 0 WHERE id = 1")
    snapshot = database.measures().commits
    assert snapshot.count == before + 4
    assert snapshot.total_seconds > 0
