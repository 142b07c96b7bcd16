"""The parser's limits: nesting depth, list lengths, and the statement's deadline."""

from __future__ import annotations

import time

import pytest

from refimpl.errors import SqlSyntaxError, StatementTimeout, StatementTooLarge
from refimpl.sql import builder
from refimpl.sql.parser import MAX_DEPTH, parse
from refimpl.sql.printer import to_sql


@pytest.mark.parametrize(
    "expression",
    [
        "NOT " * 1000 + "true",
        "+".join(["1"] * 1000),
        " AND ".join(["true"] * 1000),
        "abs(" * 1000 + "1" + ")" * 1000,
        "- " * 1000 + "x",
        "CASE WHEN " * 600 + "true" + " THEN 1 END" * 600,
    ],
)
def test_deep_nesting_is_refused_without_recursion(expression: str):
    for sql in (
        f"SELECT {expression} AS x",
        f"DELETE FROM t WHERE {expression}",
        f"UPDATE t SET a = {expression}",
        f"INSERT INTO t VALUES ({expression})",
    ):
        with pytest.raises(StatementTooLarge, match=f"nested deeper than {MAX_DEPTH}"):
            parse(sql)


def test_nesting_at_the_limit_parses_and_prints():
    expression = "NOT " * (MAX_DEPTH - 1) + "x"
    statement = parse(f"SELECT {expression} FROM t").statements[0]
    assert parse(to_sql(statement)).statements[0] == statement
    hash(statement)
    with pytest.raises(StatementTooLarge):
        parse("SELECT NOT " + expression + " FROM t")


def test_list_lengths_are_bounded():
    items = ",".join(["1"] * builder.MAX_IN_ITEMS)
    parse(f"SELECT 1 IN ({items}) AS x")
    with pytest.raises(StatementTooLarge, match="IN list"):
        parse(f"SELECT 1 IN ({items},1) AS x")
    rows = ",".join(["(1)"] * (builder.MAX_VALUES_ROWS + 1))
    with pytest.raises(StatementTooLarge, match="VALUES rows"):
        parse(f"INSERT INTO t VALUES {rows}")


def test_a_parse_past_its_deadline_stops():
    items = ",".join(str(n) for n in range(5000))
    with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
        parse(f"SELECT 1 IN ({items}) AS x", deadline=time.monotonic() - 1)
    parse(f"SELECT 1 IN ({items}) AS x", deadline=time.monotonic() + 60)


def test_numbers_out_of_range_are_syntax_errors():
    with pytest.raises(SqlSyntaxError, match="too large for a DOUBLE"):
        parse("SELECT 1e400")
    with pytest.raises(SqlSyntaxError, match="digits"):
        parse("SELECT " + "9" * 5000)
