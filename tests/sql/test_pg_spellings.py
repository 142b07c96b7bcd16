"""PostgreSQL's spellings (psql's catalog queries): they parse to the plain statements, and
what they build prints back to text that parses to the same."""

from __future__ import annotations

import pytest

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.parser import parse
from refimpl.sql.printer import to_sql


def one(text: str) -> ast.Statement:
    return parse(text).statements[0]


@pytest.mark.parametrize(
    ("pg", "plain"),
    [
        ("SELECT * FROM pg_catalog.pg_class", "SELECT * FROM pg_class"),
        ("SELECT pg_catalog.version()", "SELECT version()"),
        ("SELECT a FROM t WHERE a OPERATOR(pg_catalog.~) 'x'", "SELECT a FROM t WHERE a ~ 'x'"),
        ("SELECT a COLLATE pg_catalog.default FROM t", "SELECT a FROM t"),
        ("SELECT a::pg_catalog.int8 FROM t", "SELECT CAST(a AS BIGINT) FROM t"),
        ("SELECT -a::int FROM t", "SELECT -CAST(a AS INT) FROM t"),
        ("SELECT E'a\\nb''c\\\\'", "SELECT 'a\nb''c\\'"),
        ("INSERT INTO public.t VALUES (1)", "INSERT INTO t VALUES (1)"),
    ],
)
def test_a_postgres_spelling_is_the_plain_statement(pg, plain):
    assert one(pg) == one(plain)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t WHERE a !~* 'x' AND b ~ 'y'",
        "SELECT ARRAY(SELECT a FROM t) AS x",
        "SELECT a FROM t WHERE a = ANY ('{1,2}') OR a <> ALL (b)",
    ],
)
def test_the_new_nodes_print_back(text):
    statement = one(text)
    assert one(to_sql(statement)) == statement


def test_only_two_schemas_exist():
    with pytest.raises(SqlSyntaxError, match="schema 'other' does not exist"):
        parse("SELECT * FROM other.t")
