"""SQL's value functions without parentheses (`current_user`, `CURRENT_TIMESTAMP(3)`): calls
in the tree, written back as PostgreSQL writes them; their words stay names where no
expression may start, and a quoted name is a column (spec/sql.md, "Value functions")."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.errors import NotAllowed, SqlSyntaxError, UnknownFunction
from refimpl.sql import ast
from refimpl.sql.ast_calls import CLOCK_KEYWORDS, SESSION_KEYWORDS, VALUE_WORDS
from refimpl.sql.parser import _LARK, parse
from refimpl.sql.printer import to_sql


def expr(text: str) -> ast.Expr:
    statement = parse(f"SELECT {text}").statements[0]
    assert isinstance(statement, ast.Select)
    return statement.items[0].expr


def call(name: str, *args: ast.Expr) -> ast.FuncCall:
    return ast.FuncCall(name, args)


@pytest.mark.parametrize("word", sorted(SESSION_KEYWORDS))
def test_a_session_word_is_a_call_in_any_case(word: str) -> None:
    for spelled in (word, word.upper(), word.capitalize()):
        assert expr(spelled) == call(word)


@pytest.mark.parametrize("word", sorted(CLOCK_KEYWORDS))
def test_a_clock_word_is_a_call_with_its_precision(word: str) -> None:
    assert expr(word.upper()) == call(word)
    assert expr(f"{word}(3)") == call(word, ast.Literal(3, "INT"))
    assert expr(f"{word}(0)") == call(word, ast.Literal(0, "INT"))
    # More digits than microseconds is six, as PostgreSQL reads it.
    assert expr(f"{word}(9)") == call(word, ast.Literal(6, "INT"))
    assert expr(f"{word}(0000000000000000000000000005)") == call(word, ast.Literal(5, "INT"))
    for bad in ("()", "(1.5)", "(-1)", "(x)", "(1e2)"):
        with pytest.raises(SqlSyntaxError):
            parse(f"SELECT {word}{bad}")


@pytest.mark.parametrize("word", ["current_date", "current_time", "localtime"])
def test_a_date_or_time_of_day_is_refused_as_its_type_is(word: str) -> None:
    for text in (word, f"{word}(2)"):
        with pytest.raises(NotAllowed, match="no (DATE|TIME) type"):
            parse(f"SELECT {text}")


def test_only_current_user_and_current_schema_take_empty_parentheses() -> None:
    assert expr("current_user()") == call("current_user")
    assert expr("CURRENT_SCHEMA()") == call("current_schema")
    for word in ("session_user", "current_role", "current_catalog"):
        with pytest.raises(SqlSyntaxError, match="without parentheses"):
            parse(f"SELECT {word}()")
    # The functions PostgreSQL has by these names, called as functions.
    assert expr('"session_user"()') == call("session_user")
    assert expr("pg_catalog.current_user()") == call("current_user")


@pytest.mark.parametrize(
    "text", ["user()", '"user"()', '"current_role"()', '"current_timestamp"()', "user(1)"]
)
def test_a_keyword_only_name_is_no_function(text: str) -> None:
    with pytest.raises(UnknownFunction, match="without parentheses"):
        parse(f"SELECT {text}")


def test_user_is_the_function_in_an_expression_and_a_name_elsewhere() -> None:
    statement = parse('SELECT user, "user", t.user, user.x FROM user AS t WHERE user = "user"')
    assert statement.statements[0] == ast.Select(
        (
            ast.SelectItem(call("user")),
            ast.SelectItem(ast.ColumnRef("user")),
            ast.SelectItem(ast.ColumnRef("user", "t")),
            ast.SelectItem(ast.ColumnRef("x", "user")),
        ),
        ast.TableSource("user", "t"),
        ast.Binary("=", call("user"), ast.ColumnRef("user")),
    )
    created = parse("CREATE TABLE user (user STRING, current_user STRING)").statements[0]
    assert isinstance(created, ast.CreateTable)
    assert [c.name for c in created.columns] == ["user", "current_user"]
    assert parse("CREATE USER user").statements[0] == parse('CREATE USER "user"').statements[0]


def test_the_words_are_names_where_no_expression_starts() -> None:
    statement = parse("SELECT 1 AS current_user, 2 localtimestamp, t.current_date FROM t")
    select = statement.statements[0]
    assert isinstance(select, ast.Select)
    assert [item.alias for item in select.items[:2]] == ["current_user", "localtimestamp"]
    assert select.items[2].expr == ast.ColumnRef("current_date", "t")
    # ORDER BY takes an expression: there the word is the (refused) value function.
    with pytest.raises(NotAllowed):
        parse("SELECT a FROM t ORDER BY current_date")


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("SELECT current_user()", "SELECT current_user"),
        ('SELECT "current_user"()', "SELECT current_user"),
        ("SELECT USER, Session_User", "SELECT user, session_user"),
        (
            "SELECT CURRENT_TIMESTAMP(3), localtimestamp",
            "SELECT current_timestamp(3), localtimestamp",
        ),
        ('SELECT "user", "current_user" FROM t', 'SELECT "user", "current_user" FROM t'),
        ('SELECT t."localtime" FROM t', 'SELECT t."localtime" FROM t'),
    ],
)
def test_printed_as_postgresql_writes_them(text: str, printed: str) -> None:
    assert to_sql(parse(text).statements[0]) == printed
    assert parse(printed).statements == parse(text).statements


_NAMES = st.sampled_from(sorted(VALUE_WORDS)).flatmap(
    lambda w: st.sampled_from([w, w.upper(), w.capitalize()])
)
_CALLS = st.one_of(
    st.sampled_from(sorted(SESSION_KEYWORDS)).map(call),
    st.builds(
        lambda name, digits: (
            call(name) if digits is None else call(name, ast.Literal(digits, "INT"))
        ),
        st.sampled_from(sorted(CLOCK_KEYWORDS)),
        st.one_of(st.none(), st.integers(0, 6)),
    ),
)


@given(
    st.lists(
        st.one_of(_CALLS, _NAMES.map(ast.ColumnRef), st.builds(ast.ColumnRef, _NAMES, _NAMES)),
        min_size=1,
        max_size=4,
    )
)
def test_calls_and_columns_of_these_names_round_trip(items: list[ast.Expr]) -> None:
    select = ast.Select(
        tuple(ast.SelectItem(item) for item in items),
        ast.TableSource("t"),
        ast.Binary("=", items[0], items[-1]),
    )
    assert parse(to_sql(select)).statements == (select,)


def test_the_words_are_the_grammars() -> None:
    """VALUE_WORDS (what the printer quotes as a name) are what the grammar reads as value
    functions: its SESSION_VALUE and CLOCK_VALUE terminals, and USER."""
    read = set()
    for name in ("SESSION_VALUE", "CLOCK_VALUE"):
        pattern = _LARK.get_terminal(name).pattern.value
        found = re.search(r"\(\?:([a-z_|]+)\)", pattern)
        assert found is not None
        read |= set(found.group(1).split("|"))
    assert read | {"user"} == VALUE_WORDS
