"""Hypothesis throws statements at /exec: never a 5xx, and a failed statement changes nothing.

Statements come from grammar pieces (templates filled with expressions, literals and names,
some of them wrong), from shuffled SQL tokens, and from random text.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http.conftest import Server

EXAMPLES = int(os.environ.get("SQL_FUZZ_EXAMPLES", "250"))

NAMES = ["id", "v", "s", "ts", "ok", "nope", "t", "T", '"id"', "*"]
LITERALS = [
    "0", "1", "-1", "2147483648", "9223372036854775808", "1.5", "-0.0", "1e309", "'x'", "''",
    "'it''s'", "NULL", "true", "false", "'2026-01-01T00:00:00Z'", "'not a time'", "?", "1/0",
]  # fmt: skip
OPERATORS = ["+", "-", "*", "/", "%", "=", "<>", "!=", "<", "<=", ">", ">=", "AND", "OR", "||"]
TOKENS = [
    "SELECT", "FROM", "WHERE", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "CREATE",
    "TABLE", "ALTER", "ADD", "COLUMN", "GROUP", "BY", "ORDER", "LIMIT", "OFFSET", "AS", "NOT",
    "NULL", "IS", "IN", "BETWEEN", "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "CAST",
    "count", "sum", "min", "max", "avg", "(", ")", ",", ";", "t", "id", "v", "1", "'a'", "*",
    "BEGIN", "COMMIT", "ROLLBACK", "DISTINCT", "HAVING", "JOIN", "ON", "changes", "SHOW",
]  # fmt: skip


def expressions() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(NAMES[:6] + LITERALS)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(OPERATORS), inner).map(" ".join),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"NOT {e}"),
            st.tuples(st.sampled_from(["count", "sum", "abs", "nope", "min"]), inner).map(
                lambda p: f"{p[0]}({p[1]})"
            ),
            st.tuples(inner, st.sampled_from(["INT", "DOUBLE", "STRING", "TIMESTAMP", "X"])).map(
                lambda p: f"CAST({p[0]} AS {p[1]})"
            ),
            inner.map(lambda e: f"{e} IS NULL"),
            st.tuples(inner, inner, inner).map(lambda p: f"{p[0]} BETWEEN {p[1]} AND {p[2]}"),
        ),
        max_leaves=6,
    )


def statements() -> st.SearchStrategy[str]:
    e = expressions()
    lits = st.lists(st.sampled_from(LITERALS), min_size=1, max_size=6).map(", ".join)
    templates = st.one_of(
        st.tuples(e, e).map(lambda p: f"SELECT {p[0]} FROM t WHERE {p[1]}"),
        st.tuples(e, e).map(lambda p: f"SELECT {p[0]} AS x, count(*) FROM t GROUP BY {p[1]}"),
        st.tuples(e, e).map(lambda p: f"SELECT * FROM t ORDER BY {p[0]} LIMIT {p[1]}"),
        lits.map(lambda v: f"INSERT INTO t VALUES ({v})"),
        lits.map(lambda v: f"INSERT INTO t (id, v) VALUES ({v})"),
        st.tuples(st.sampled_from(NAMES), e, e).map(
            lambda p: f"UPDATE t SET {p[0]} = {p[1]} WHERE {p[2]}"
        ),
        e.map(lambda w: f"DELETE FROM t WHERE {w}"),
        st.tuples(st.sampled_from(NAMES), st.sampled_from(["INT", "X", "TIMESTAMP"])).map(
            lambda p: f"ALTER TABLE t ADD COLUMN {p[0]} {p[1]}"
        ),
        st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12).map(" ".join),
        st.text(max_size=60),
    )
    scripts = st.lists(templates, min_size=2, max_size=4).map("; ".join)
    wrapped = templates.map(lambda s: f"BEGIN; INSERT INTO t (id) VALUES (99); {s}; COMMIT")
    return st.one_of(templates, templates, templates, scripts, wrapped)


def snapshot(server: Server, db: str) -> dict[str, tuple]:
    """Every table's columns and rows (sorted), the state a failure must leave alone."""
    state: dict[str, tuple] = {}
    for (name,) in server.rows("SHOW TABLES", db):
        columns = server.rows(f"SHOW COLUMNS FROM {name}", db)
        rows = server.rows(f"SELECT * FROM {name}", db)
        state[name] = (columns, sorted(map(repr, rows)))
    return state


@pytest.fixture
def fuzz_db(server: Server, db: str) -> str:
    server.sql(
        "CREATE TABLE t (id INT, v DOUBLE, s STRING, ts TIMESTAMP, ok BOOLEAN);"
        " INSERT INTO t VALUES (1, 1.5, 'a', '2026-01-01T00:00:00Z', true),"
        " (2, NULL, NULL, NULL, NULL), (3, -2.0, 'c', '2026-01-02T00:00:00Z', false)",
        db,
    )
    return db


def test_exec_never_fails_the_server_and_failures_change_nothing(server: Server, fuzz_db: str):
    state = {"before": snapshot(server, fuzz_db)}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(sql=statements())
    def check(sql: str) -> None:
        response = server.post("/exec", params={"db": fuzz_db}, data=sql.encode("utf-8"))
        assert response.status_code < 500, (sql, response.text)
        assert response.headers["Content-Type"] == "application/json", sql
        body = response.json()
        after = snapshot(server, fuzz_db)
        if response.status_code >= 400:
            assert isinstance(body["error"], str) and body["error"], sql
            # A script's earlier statements may have committed; a single statement may not.
            if body.get("statement", 1) == 1 and not sql.lstrip().upper().startswith("BEGIN"):
                assert after == state["before"], (sql, body)
            if sql.startswith("BEGIN; INSERT INTO t (id) VALUES (99);"):
                assert after == state["before"], (sql, body)
        state["before"] = after

    check()
