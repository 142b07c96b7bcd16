"""Secondary indexes, UNIQUE and EXPLAIN through the embedded API.

The central property: a query answers the same rows, in the same order, whether or not an
index serves it, after any sequence of changes (and after a restart, which rebuilds the
indexes from the rows).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.errors import IndexExists, SqlError, UniqueViolation, UnknownIndex


@pytest.fixture
def db(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    yield connection
    connection.close()


def rows(db, sql: str) -> list[tuple]:
    return db.execute(sql).rows


def plan(db, sql: str) -> list[str]:
    return [line for (line,) in rows(db, "EXPLAIN " + sql)]


_VALUES = st.one_of(st.none(), st.integers(-3, 3))
_CHANGES = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), _VALUES, _VALUES),
        st.tuples(st.just("update"), _VALUES, _VALUES),
        st.tuples(st.just("delete"), _VALUES, st.none()),
    ),
    max_size=25,
)
_QUERIES = [
    "a = {x}",
    "a = {x} AND b = {y}",
    "a = {x} AND b > {y}",
    "a > {x}",
    "a >= {x} AND a < {y}",
    "a BETWEEN {x} AND {y}",
    "b = {x}",
    "a = {x} AND b <= {y}",
    "a < {x} OR b = {y}",
]


def _literal(value: int | None) -> str:
    return "NULL" if value is None else str(value)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(changes=_CHANGES, x=st.integers(-3, 3), y=st.integers(-3, 3))
def test_an_index_never_changes_an_answer(tmp_path_factory, changes, x, y) -> None:
    folder = tmp_path_factory.mktemp("idx")
    with_index = refimpl.connect(folder / "with")
    without = refimpl.connect(folder / "without")
    for db in (with_index, without):
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    with_index.execute("CREATE INDEX t_ab ON t (a, b)")
    with_index.execute("CREATE INDEX t_b ON t (b)")
    for number, (kind, first, second) in enumerate(changes):
        if kind == "insert":
            sql = f"INSERT INTO t VALUES ({number}, {_literal(first)}, {_literal(second)})"
        elif kind == "update":
            sql = f"UPDATE t SET a = {_literal(second)} WHERE a = {_literal(first)}"
        else:
            sql = f"DELETE FROM t WHERE b = {_literal(first)}"
        for db in (with_index, without):
            db.execute(sql)
    queries = [f"SELECT * FROM t WHERE {q.format(x=x, y=y)}" for q in _QUERIES]
    answers = [rows(without, q) for q in queries]
    assert [rows(with_index, q) for q in queries] == answers
    assert any("USING INDEX" in line for line in plan(with_index, queries[1]))
    with_index.close()
    reopened = refimpl.connect(folder / "with")
    assert [rows(reopened, q) for q in queries] == answers
    reopened.close()
    without.close()


def test_indexes_survive_a_checkpoint_and_the_log(tmp_path: Path) -> None:
    db = refimpl.connect(tmp_path / "data")
    db.execute("CREATE TABLE t (a INT, b STRING UNIQUE)")
    db.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    db.execute("CREATE UNIQUE INDEX t_a ON t (a)")
    db.execute("CHECKPOINT")
    db.execute("INSERT INTO t VALUES (3, 'z')")
    db.execute("CREATE INDEX t_ab ON t (a, b)")
    db.close()
    db = refimpl.connect(tmp_path / "data")
    assert plan(db, "SELECT * FROM t WHERE a = 3") == [
        "SEARCH TABLE t USING UNIQUE INDEX t_a (a = 3)"
    ]
    assert rows(db, "SELECT * FROM t WHERE a = 3") == [(3, "z")]
    with pytest.raises(UniqueViolation, match="index 't_a'"):
        db.execute("INSERT INTO t VALUES (3, 'w')")
    with pytest.raises(UniqueViolation, match=r"UNIQUE \(b\)"):
        db.execute("INSERT INTO t VALUES (4, 'x')")
    db.execute("DROP INDEX t_ab")
    db.close()
    db = refimpl.connect(tmp_path / "data")
    with pytest.raises(UnknownIndex):
        db.execute("DROP INDEX t_ab")
    db.close()


def test_unique_forgives_nulls(db) -> None:
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, w INT, UNIQUE (v, w))")
    db.execute("INSERT INTO t VALUES (1, 10, NULL), (2, 10, NULL), (3, NULL, NULL)")
    with pytest.raises(UniqueViolation, match=r"\(10, 1\)"):
        db.execute("INSERT INTO t VALUES (4, 10, 1), (5, 10, 1)")
    assert rows(db, "SELECT count(*) FROM t") == [(3,)]


def test_unique_in_one_transaction(db) -> None:
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT UNIQUE)")
    db.execute("INSERT INTO t VALUES (1, 10)")
    db.execute("BEGIN; UPDATE t SET v = 11 WHERE id = 1; INSERT INTO t VALUES (4, 10); COMMIT")
    assert rows(db, "SELECT id, v FROM t ORDER BY id") == [(1, 11), (4, 10)]
    with pytest.raises(UniqueViolation):
        db.execute("BEGIN; INSERT INTO t VALUES (5, 12); INSERT INTO t VALUES (6, 12)")
    assert rows(db, "SELECT count(*) FROM t") == [(2,)]


def test_index_names_and_errors(db) -> None:
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE TABLE u (a INT)")
    db.execute("CREATE INDEX i ON t (a)")
    with pytest.raises(IndexExists, match="on table 't'"):
        db.execute("CREATE INDEX I ON u (a)")
    assert db.execute("CREATE INDEX IF NOT EXISTS i ON u (a)").message == (
        "index 'i' already exists"
    )
    with pytest.raises(SqlError, match="twice"):
        db.execute("CREATE INDEX j ON t (a, A)")
    with pytest.raises(SqlError, match="does not exist"):
        db.execute("CREATE INDEX j ON t (c)")
    with pytest.raises(SqlError, match="index i"):
        db.execute("ALTER TABLE t DROP COLUMN a")
    db.execute("ALTER TABLE t DROP COLUMN b")
    db.execute("INSERT INTO t VALUES (5)")
    assert rows(db, "SELECT a FROM t WHERE a = 5") == [(5,)]
    assert db.execute("DROP INDEX I").message == "index 'i' dropped from table 't'"


def test_explain_names_access_paths(db) -> None:
    db.execute("CREATE TABLE m (ts TIMESTAMP, s SYMBOL, v DOUBLE) TIMESERIES(ts) PARTITION BY DAY")
    db.execute("INSERT INTO m VALUES ('2026-01-01', 'a', 1), ('2026-01-02', 'b', 2)")
    db.execute("CREATE INDEX m_s ON m (s)")
    assert plan(db, "SELECT * FROM m WHERE ts >= '2026-01-02'") == [
        "SCAN TABLE m (partitions 1 of 2)"
    ]
    assert plan(db, "SELECT count(*) FROM m AS x WHERE s = 'b' AND v > 1") == [
        "AGGREGATE",
        "SEARCH TABLE m AS x USING INDEX m_s (s = 'b')",
    ]
    assert plan(db, "SELECT 1") == ["ONE ROW (no FROM)"]
    with pytest.raises(SqlError):
        db.execute("EXPLAIN DROP TABLE m")
