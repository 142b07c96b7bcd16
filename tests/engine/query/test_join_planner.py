"""The join planner against the unplanned cross product: on small generated tables (NULLs
among the values), each query's answer equals that of the same query written so that no
condition can be placed (the whole WHERE one CASE over every table, so the rows are every
combination, filtered afterwards), and SQLite's. EXPLAIN shows the order, keys and filters."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.errors import SubqueryRows

TABLES = ("t1", "t2", "t3")
VALUES = st.one_of(st.none(), st.integers(0, 3))
ROWS = st.lists(st.tuples(VALUES, VALUES), max_size=6)
# FROM forms; {0} and {1} are ON conditions, over the tables each ON may name.
FORMS = [
    ("t1, t2, t3", (), ()),
    ("t1 JOIN t2 ON {0} JOIN t3 ON {1}", ("t1", "t2"), TABLES),
    ("t1 CROSS JOIN (t2 JOIN t3 ON {1})", (), ("t2", "t3")),
    ("(t3 JOIN t1 ON {0}) INNER JOIN t2 ON {1}", ("t1", "t3"), TABLES),
    ("t1 JOIN (t2 JOIN t3 ON {1}) ON {0}", TABLES, ("t2", "t3")),
    ("t1 LEFT JOIN t2 ON {0}, t3", ("t1", "t2"), ()),
    ("t2, t1 LEFT JOIN t3 ON {1}", (), ("t1", "t3")),
    ("t3 RIGHT JOIN (t1 JOIN t2 ON {0}) ON {1}", ("t1", "t2"), TABLES),
]


def _columns(tables: tuple[str, ...]) -> list[str]:
    return [f"{t}.{c}{t[1]}" for t in tables for c in "ab"]


COLUMNS = _columns(TABLES)


def _atom(tables: tuple[str, ...]) -> st.SearchStrategy[str]:
    column = st.sampled_from(_columns(tables))
    constant = st.integers(0, 3).map(str)
    return st.one_of(
        st.tuples(column, st.sampled_from(["=", "<", "<>"]), column).map(" ".join),
        st.tuples(column, st.sampled_from(["=", ">="]), constant).map(" ".join),
        column.map(lambda c: f"{c} IS NULL"),
        st.tuples(column, column).map(lambda p: f"{p[0]} = {p[1]} + 1"),
        st.tuples(column, column).map(lambda p: f"({p[0]} = 1 OR {p[1]} = 2)"),
    )


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, str | None]:
    """A query, and the same rows asked with nothing the planner can place (None: the form
    has an outer join, which has no such writing)."""
    form, first, second = draw(st.sampled_from(FORMS))
    on = [draw(_atom(tables)) if tables else "" for tables in (first, second)]
    where = draw(st.lists(_atom(TABLES), max_size=5))
    items = ", ".join(COLUMNS)
    sql = f"SELECT {items} FROM {form.format(*on)} WHERE {' AND '.join(where) or '1 = 1'}"
    if "LEFT" in form or "RIGHT" in form:
        return sql, None
    test = " AND ".join(f"({c})" for c in [*where, *(c for c in on if c)]) or "1 = 1"
    cross = f"SELECT {items} FROM t1, t2, t3 WHERE CASE WHEN {test} THEN 1 ELSE 0 END = 1"
    return sql, cross


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path_factory.mktemp("planner") / "data")
    # t1 has a key (its joins may look rows up by it), t2 an index, t3 nothing.
    connection.execute("CREATE TABLE t1 (a1 INT PRIMARY KEY, b1 INT)")
    connection.execute("CREATE TABLE t2 (a2 INT, b2 INT)")
    connection.execute("CREATE INDEX t2_b ON t2 (b2)")
    connection.execute("CREATE TABLE t3 (a3 INT, b3 INT)")
    yield connection
    connection.close()


def _load(db: refimpl.Connection, data: list[list[tuple]]) -> sqlite3.Connection:
    lite = sqlite3.connect(":memory:")
    script = ["BEGIN"] + [f"DELETE FROM {t}" for t in TABLES]
    for table, rows in zip(TABLES, data, strict=True):
        key = " PRIMARY KEY" if table == "t1" else ""
        lite.execute(f"CREATE TABLE {table} (a{table[1]} INT{key}, b{table[1]} INT)")
        if table == "t1":
            rows = list({a: (a, b) for a, b in rows if a is not None}.values())
        for row in rows:
            values = ", ".join("NULL" if v is None else str(v) for v in row)
            script.append(f"INSERT INTO {table} VALUES ({values})")
            lite.execute(f"INSERT INTO {table} VALUES ({values})")
    db.execute("; ".join([*script, "COMMIT"]))
    return lite


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.tuples(ROWS, ROWS, ROWS), asked=st.lists(queries(), min_size=1, max_size=8))
def test_a_planned_join_answers_as_the_cross_product(db, data, asked) -> None:
    lite = _load(db, list(data))
    for sql, cross in asked:
        planned = Counter(tuple(r) for r in db.execute(sql).rows)
        assert planned == Counter(lite.execute(sql).fetchall()), sql
        if cross is not None:
            assert planned == Counter(tuple(r) for r in db.execute(cross).rows), sql
    lite.close()


def test_explain_shows_order_keys_and_filters(db) -> None:
    _load(db, [[(1, 1), (2, 2)], [(1, 1)] * 5, [(2, 2)] * 9]).close()
    plan = [
        row[0]
        for row in db.execute(
            "EXPLAIN SELECT * FROM t3, t2, t1 WHERE a1 = a2 AND b2 = b3 AND b1 = 1 AND b3 < a1"
        ).rows
    ]
    assert plan == [
        "JOIN t1, t2, t3",
        "  SCAN TABLE t1 FILTER b1 = 1",
        "  HASH JOIN t2 KEYS a1 = a2",
        "    SCAN TABLE t2",
        "  HASH JOIN t3 KEYS b2 = b3 FILTER b3 < a1",
        "    SCAN TABLE t3",
    ]


@pytest.mark.parametrize(
    "condition",
    [
        "2 NOT BETWEEN -2 AND (SELECT a1 FROM t1)",  # found by the long differential run
        "(SELECT a1 FROM t1 WHERE TRUE) IS NOT NULL",
        "0 < (SELECT a1 FROM t1) + 1",
    ],
)
def test_a_condition_on_no_item_is_checked_before_any_row(db, condition: str) -> None:
    # As PostgreSQL's one-time filter: its error is the query's even when the join has no
    # row at all (t3 is empty here), not only when a joined row comes to be checked.
    _load(db, [[(1, 1), (2, 2)], [(1, 1)], []]).close()
    sql = f"SELECT a1 FROM t1 JOIN t2 ON a1 = a2 CROSS JOIN t3 WHERE {condition}"
    with pytest.raises(SubqueryRows, match="more than one row returned by a subquery"):
        db.execute(sql)
    assert db.execute(f"EXPLAIN {sql}").rows[1][0] == f"  ONE-TIME FILTER {condition}"


def test_a_constant_condition_gates_the_rows_it_is_true_or_false_for(db) -> None:
    _load(db, [[(1, 1), (2, 2)], [(1, 1), (2, 2)], [(7, 7)]]).close()
    sql = "SELECT a1, a3 FROM t1 JOIN t2 ON a1 = a2, t3 WHERE {} ORDER BY a1"
    assert db.execute(sql.format("(SELECT max(a1) FROM t1) = 2")).rows == [(1, 7), (2, 7)]
    assert db.execute(sql.format("(SELECT max(a1) FROM t1) = 3")).rows == []
    assert db.execute(sql.format("(SELECT max(a1) FROM t1 WHERE a1 > 5) = 3")).rows == []
    # A subquery that reads a joined row's column is no constant: checked on each row.
    assert db.execute(sql.format("(SELECT b1 FROM t1 AS u WHERE u.a1 = t2.a2) = 2")).rows == [
        (2, 7)
    ]
