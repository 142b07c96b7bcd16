"""The result cache never changes an answer: a cached engine answers as one without a cache.

The same statements run on two connections (separate data folders): one with the result
cache, one with `result_cache_bytes=0`. Every answer, error or not, must be the same.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.errors import KdbError

SETUP = [
    "CREATE TABLE c (time TIMESTAMP, sym SYMBOL, v DOUBLE) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym) SORT BY (sym, time) DEDUP KEY (sym, time)",
    "CREATE TABLE k (id INT PRIMARY KEY, sym SYMBOL, v INT)",
]
SYMBOLS = ["A", "B", "C"]


def _time(day: int, minute: int) -> str:
    return f"2026-01-{day + 1:02d}T00:{minute:02d}:00Z"


sym = st.sampled_from(SYMBOLS)
day = st.integers(0, 2)
minute = st.integers(0, 4)
small = st.integers(-3, 9)

# A write is (sql, params).
WRITES = st.one_of(
    st.builds(
        lambda s, d, m, v: ("INSERT INTO c VALUES (?, ?, ?)", (_time(d, m), s, float(v))),
        sym,
        day,
        minute,
        small,
    ),
    st.builds(lambda s, v: ("UPDATE c SET v = v + ? WHERE sym = ?", (float(v), s)), sym, small),
    st.builds(
        lambda a, b, d: ("UPDATE c SET sym = ? WHERE sym = ? AND time >= ?", (a, b, _time(d, 0))),
        sym,
        sym,
        day,
    ),
    st.builds(lambda s, v: ("DELETE FROM c WHERE sym = ? AND v > ?", (s, float(v))), sym, small),
    st.builds(lambda d: ("DELETE FROM c WHERE time < ?", (_time(d, 0),)), day),
    st.just(("TRUNCATE c", ())),
    st.builds(lambda d: (f"ALTER TABLE c DROP PARTITION WHERE time < '{_time(d, 0)}'", ()), day),
    st.builds(
        lambda i, s, v: ("INSERT INTO k VALUES (?, ?, ?)", (i, s, v)), st.integers(0, 6), sym, small
    ),
    st.builds(lambda i, v: ("UPDATE k SET v = ? WHERE id = ?", (v, i)), st.integers(0, 6), small),
    st.builds(lambda s: ("UPDATE k SET v = v + 1 WHERE sym = ?", (s,)), sym),
    st.builds(lambda i: ("DELETE FROM k WHERE id >= ?", (i,)), st.integers(0, 6)),
    st.just(("TRUNCATE k", ())),
)

# A read is (sql, params); the pool is small so reads repeat and hit the cache.
READS = st.one_of(
    st.builds(lambda s: ("SELECT * FROM c WHERE sym = ?", (s,)), sym),
    st.builds(lambda s: (f"SELECT time, v FROM c WHERE sym = '{s}' ORDER BY time DESC", ()), sym),
    st.builds(
        lambda s: (f"SELECT count(*), sum(v), min(v), max(v) FROM c WHERE sym = '{s}'", ()), sym
    ),
    st.builds(
        lambda s, d: ("SELECT * FROM c WHERE sym = ? AND time >= ?", (s, _time(d, 0))), sym, day
    ),
    st.just(("SELECT * FROM c", ())),
    st.just(("SELECT sym, count(*) AS n, sum(v) FROM c GROUP BY sym ORDER BY sym", ())),
    st.just(
        ("SELECT date_trunc('day', time) AS d, count(*), last(v) FROM c GROUP BY d ORDER BY d", ())
    ),
    st.builds(
        lambda n: (f"SELECT sym, time, v FROM c ORDER BY v DESC, sym, time LIMIT {n}", ()),
        st.integers(1, 3),
    ),
    st.builds(lambda s: ("SELECT count(*) FROM c WHERE sym = ? OR v > 3", (s,)), sym),
    st.builds(lambda s: ("SELECT count(*) FROM c WHERE NOT (sym = ?)", (s,)), sym),
    st.builds(lambda i: ("SELECT * FROM k WHERE id = ?", (i,)), st.integers(0, 6)),
    st.just(("SELECT sym, sum(v) FROM k GROUP BY sym ORDER BY sym", ())),
    st.just(("SELECT * FROM k ORDER BY v, id LIMIT 2", ())),
    st.builds(lambda s: ("SELECT count(*) FROM k WHERE sym = ?", (s,)), sym),
)
# The same text with parameters of other types (1 == 1.0 == True) must not share an answer.
TYPED_READS = st.one_of(
    st.builds(
        lambda p: ("SELECT ? AS x, count(*) FROM k", (p,)), st.sampled_from([1, 1.0, True, "1"])
    ),
    st.builds(
        lambda p: ("SELECT v + ? FROM k WHERE id = 1", (p,)),
        st.sampled_from([1, 1.0, True, 0, 0.0, False]),
    ),
)

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), WRITES),
        st.tuples(st.just("read"), READS),
        st.tuples(st.just("read"), TYPED_READS),
        st.tuples(st.just("other_read"), READS),  # another session: committed rows only
        st.tuples(st.sampled_from(["begin", "commit", "rollback"])),
    ),
    max_size=40,
)


def outcome(session, sql, params):
    try:
        result = session.execute(sql, params)
    except KdbError as error:
        return ("error", type(error).__name__, str(error))
    columns = [(c.name, c.type) for c in result.columns or []]
    return ("ok", columns, result.rows, result.message)


class Pair:
    """Two engines, one with the cache and one without, fed the same statements."""

    def __init__(self, folder: Path, cache_bytes: int = 64 * 1024 * 1024) -> None:
        self.cached = refimpl.connect(
            folder / "cached", options=refimpl.EngineOptions(result_cache_bytes=cache_bytes)
        )
        self.plain = refimpl.connect(
            folder / "plain", options=refimpl.EngineOptions(result_cache_bytes=0)
        )
        self.sessions = [(c.session(), c.session()) for c in (self.cached, self.plain)]
        for statement in SETUP:
            self.both(0, statement, ())

    def both(self, which: int, sql: str, params: tuple):
        answers = [outcome(pair[which], sql, params) for pair in self.sessions]
        assert answers[0] == answers[1], (sql, params)
        return answers[0]

    def cache_stats(self) -> dict[str, int]:
        return self.cached.instance.database("demo").result_cache.stats()

    def close(self) -> None:
        for pair in self.sessions:
            pair[0].close()
        self.cached.close()
        self.plain.close()


def run_steps(steps, cache_bytes: int = 64 * 1024 * 1024) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as folder:
        pair = Pair(Path(folder), cache_bytes)
        try:
            in_transaction = False
            for step in steps:
                kind = step[0]
                if kind == "write":
                    pair.both(0, *step[1])
                elif kind == "read":
                    pair.both(0, *step[1])
                elif kind == "other_read":
                    pair.both(1, *step[1])
                elif kind == "begin" and not in_transaction:
                    pair.both(0, "BEGIN", ())
                    in_transaction = True
                elif kind in ("commit", "rollback") and in_transaction:
                    pair.both(0, kind.upper(), ())
                    in_transaction = False
                # Whatever happened, the session's transaction state is the same on both.
                states = [p[0].transaction is None for p in pair.sessions]
                assert states[0] == states[1]
                in_transaction = not states[0]
            if in_transaction:
                pair.both(0, "COMMIT", ())
            for sql in ("SELECT * FROM c", "SELECT * FROM k"):
                pair.both(1, sql, ())
            stats = pair.cache_stats()
            assert stats["bytes"] <= cache_bytes
            return stats
        finally:
            pair.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_cached_answers_equal_uncached_answers(steps):
    run_steps(steps)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_cached_answers_equal_uncached_answers_with_a_tiny_cache(steps):
    stats = run_steps(steps, cache_bytes=6_000)
    assert stats["bytes"] <= 6_000


@pytest.mark.long
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_cached_answers_equal_uncached_answers_long(steps):
    run_steps(steps)


# -- the cache works, and stays within its memory -----------------------------------------


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    for statement in SETUP:
        connection.execute(statement)
    connection.execute(
        "INSERT INTO c VALUES ('2026-01-01T00:00:00Z', 'A', 1), ('2026-01-01T00:00:00Z', 'B', 2)"
    )
    yield connection
    connection.close()


def stats(conn) -> dict[str, int]:
    return conn.instance.stats()["databases"]["demo"]["result_cache"]


def test_hits_happen_and_follow_the_revisions(conn):
    pinned = "SELECT * FROM c WHERE sym = 'A'"
    unpinned = "SELECT count(*) FROM c"
    first = conn.execute(pinned).rows
    conn.execute(unpinned)
    start = stats(conn)
    assert conn.execute(pinned).rows == first
    assert conn.execute(unpinned).rows == [(2,)]
    after = stats(conn)
    assert after["hits"] == start["hits"] + 2
    # Another symbol's write: the pinned answer stays, the unpinned one is run again.
    conn.execute("INSERT INTO c VALUES ('2026-01-01T00:01:00Z', 'B', 3)")
    before = stats(conn)
    assert conn.execute(pinned).rows == first
    assert stats(conn)["hits"] == before["hits"] + 1
    assert conn.execute(unpinned).rows == [(3,)]
    assert stats(conn)["misses"] == before["misses"] + 1
    # Its own symbol's write: run again, with the new row.
    conn.execute("INSERT INTO c VALUES ('2026-01-01T00:01:00Z', 'A', 4)")
    before = stats(conn)
    assert len(conn.execute(pinned).rows) == 2
    assert stats(conn)["misses"] == before["misses"] + 1
    # The same query with parameters is cached too, per parameter value.
    conn.execute("SELECT * FROM c WHERE sym = ?", ("A",))
    before = stats(conn)
    assert len(conn.execute("SELECT * FROM c WHERE sym = ?", ("A",)).rows) == 2
    assert len(conn.execute("SELECT * FROM c WHERE sym = ?", ("B",)).rows) == 2
    assert stats(conn)["hits"] == before["hits"] + 1
    # A write of another table leaves c's answers alone.
    conn.execute(unpinned)
    conn.execute("INSERT INTO k VALUES (1, 'A', 1)")
    before = stats(conn)
    conn.execute(unpinned)
    assert stats(conn)["hits"] == before["hits"] + 1


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT ? AS x FROM k", [(1,), (1.0,), (True,)]),
        ("SELECT v + ? AS x FROM k WHERE sym = 'A'", [(0,), (0.0,), (False,)]),
    ],
)
def test_parameters_of_other_types_do_not_share_an_answer(tmp_path, sql, params):
    pair = Pair(tmp_path)
    try:
        pair.both(0, "INSERT INTO k VALUES (1, 'A', 1)", ())
        for values in params:
            pair.both(0, sql, values)
    finally:
        pair.close()


def test_volatile_answers_are_never_served_from_the_cache(conn):
    revision = "SELECT kdb_rev('c', 'A'), count(*) FROM c WHERE sym = 'A'"
    first = conn.execute(revision).rows
    conn.execute("INSERT INTO c VALUES ('2026-01-01T00:05:00Z', 'A', 1)")
    second = conn.execute(revision).rows
    assert first[0][0] != second[0][0]
    before = stats(conn)
    now = [conn.execute("SELECT now() FROM c WHERE sym = 'B'").rows for _ in range(3)]
    assert stats(conn)["entries"] == before["entries"]
    assert now[0] <= now[-1]


def test_no_cache_keeps_nothing(tmp_path):
    connection = refimpl.connect(
        tmp_path / "data", options=refimpl.EngineOptions(result_cache_bytes=0)
    )
    try:
        connection.execute(SETUP[1])
        for _ in range(3):
            connection.execute("SELECT * FROM k")
        assert stats(connection) == {
            "entries": 0,
            "bytes": 0,
            "hits": 0,
            "misses": 0,
            "evictions": 0,
        }
    finally:
        connection.close()


def test_memory_stays_bounded(tmp_path):
    limit = 8_000
    connection = refimpl.connect(
        tmp_path / "data", options=refimpl.EngineOptions(result_cache_bytes=limit)
    )
    try:
        connection.execute(SETUP[1])
        connection.execute("INSERT INTO k VALUES (1, 'A', 1), (2, 'B', 2), (3, 'C', 3)")
        for i in range(200):
            assert connection.execute("SELECT id, v + ? FROM k", (i,)).rows[0][1] == 1 + i
            current = stats(connection)
            assert current["bytes"] <= limit
        final = stats(connection)
        assert final["evictions"] > 0
        assert 0 < final["entries"] < 200
        # The most recent answers are kept and hit; the oldest were evicted.
        connection.execute("SELECT id, v + ? FROM k", (199,))
        assert stats(connection)["hits"] == final["hits"] + 1
        connection.execute("SELECT id, v + ? FROM k", (0,))
        assert stats(connection)["misses"] == final["misses"] + 1
        # An answer too big for a quarter of the cache is not kept at all.
        connection.execute("DELETE FROM k")
        rows = [(i, "S", i) for i in range(200)]
        connection.session().insert_rows("k", ["id", "sym", "v"], rows)
        before = stats(connection)
        connection.execute("SELECT * FROM k")
        connection.execute("SELECT * FROM k")
        after = stats(connection)
        assert after["hits"] == before["hits"] and after["bytes"] <= limit
    finally:
        connection.close()
