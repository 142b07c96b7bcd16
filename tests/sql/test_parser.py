"""SQL text -> ast nodes, and the error messages for text that does not parse."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.ast import (
    Begin,
    Between,
    Binary,
    Case,
    Cast,
    ColumnDef,
    Commit,
    CreateTable,
    DropTable,
    FuncCall,
    InList,
    Insert,
    IsNull,
    Like,
    Param,
    Select,
    SelectItem,
    TableSource,
    Truncate,
    Unary,
    Update,
)
from refimpl.sql.parser import KEYWORDS, NAME_KEYWORDS, RESERVED_WORDS, parse, parse_cached
from tests.sql.statements import STATEMENTS, col, lit


def one(text: str) -> ast.Statement:
    script = parse(text)
    assert len(script.statements) == 1, script
    return script.statements[0]


def expr(text: str) -> ast.Expr:
    statement = one(f"SELECT {text}")
    assert isinstance(statement, Select)
    return statement.items[0].expr


@pytest.mark.parametrize(("text", "node"), STATEMENTS, ids=[t[:40] for t, _ in STATEMENTS])
def test_statement(text: str, node: ast.Statement) -> None:
    assert one(text) == node


def test_keywords_are_case_insensitive() -> None:
    assert one("sElEcT a FrOm t wHeRe b Is NoT nUlL") == Select(
        (SelectItem(col("a")),), TableSource("t"), IsNull(col("b"), True)
    )


def test_names_keep_their_case_and_quotes_allow_anything() -> None:
    assert one('SELECT MyCol, "from", "a ""b"" c", "Ünï code" FROM "My Table"') == Select(
        (
            SelectItem(col("MyCol")),
            SelectItem(col("from")),
            SelectItem(col('a "b" c')),
            SelectItem(col("Ünï code")),
        ),
        TableSource("My Table"),
    )


def test_soft_keywords_work_as_names() -> None:
    created = one(
        "CREATE TABLE t (key INT, op STRING, seq INT, lsn INT, time TIMESTAMP, "
        "symbol SYMBOL, first DOUBLE, last DOUBLE, value DOUBLE)"
    )
    assert isinstance(created, ast.CreateTable)
    assert [c.name for c in created.columns] == [
        "key",
        "op",
        "seq",
        "lsn",
        "time",
        "symbol",
        "first",
        "last",
        "value",
    ]
    assert one("SELECT first(price), last(price), key, op FROM t WHERE time > '2026-01-01'") == (
        Select(
            (
                SelectItem(FuncCall("first", (col("price"),))),
                SelectItem(FuncCall("last", (col("price"),))),
                SelectItem(col("key")),
                SelectItem(col("op")),
            ),
            TableSource("t"),
            Binary(">", col("time"), lit("2026-01-01")),
        )
    )
    assert one("SELECT timestamp, name, table, primary, if, year FROM table") == Select(
        tuple(SelectItem(col(n)) for n in ("timestamp", "name", "table", "primary", "if", "year")),
        TableSource("table"),
    )
    assert one("DROP TABLE if") == DropTable("if")
    assert one("TRUNCATE TABLE table") == Truncate("table")
    assert one("CREATE TABLE primary (primary INT PRIMARY KEY)") == CreateTable(
        "primary", (ColumnDef("primary", "INT"),), primary_key=("primary",)
    )
    assert one("INSERT INTO values (key, values) VALUES (1, 2)") == Insert(
        "values", ("key", "values"), rows=((lit(1), lit(2)),)
    )


# USER is a name too, but in an expression it is SQL's USER (tests/sql/test_value_functions.py).
@pytest.mark.parametrize("word", sorted(NAME_KEYWORDS - {"USER"}))
def test_every_name_keyword_is_a_name(word: str) -> None:
    assert one(f"SELECT {word} FROM {word.lower()}") == Select(
        (SelectItem(col(word)),), TableSource(word.lower())
    )
    created = one(f"CREATE TABLE t ({word} INT)")
    assert isinstance(created, ast.CreateTable)
    assert created.columns == (ColumnDef(word, "INT"),)


@pytest.mark.parametrize("word", sorted(RESERVED_WORDS))
def test_reserved_words_need_quotes(word: str) -> None:
    assert word in KEYWORDS
    with pytest.raises(SqlSyntaxError):
        parse(f"SELECT a FROM {word.lower()}")
    assert one(f'SELECT a FROM "{word.lower()}"') == Select(
        (SelectItem(col("a")),), TableSource(word.lower())
    )


# ---------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("1", lit(1)),
        ("1.5", lit(1.5)),
        ("1e3", lit(1000.0)),
        ("1E-2", lit(0.01)),
        (".5", lit(0.5)),
        ("5.", lit(5.0)),
        ("-1", lit(-1)),
        ("- 2.5", lit(-2.5)),
        ("-(3)", lit(-3)),
        ("12345678901234567890", lit(12345678901234567890)),
        ("'it''s'", lit("it's")),
        ("''", lit("")),
        ("'line\nbreak -- not a comment'", lit("line\nbreak -- not a comment")),
        ("TRUE", lit(True)),
        ("false", lit(False)),
        ("NULL", lit(None)),
        ("-a", Unary("-", col("a"))),
        ("+a", Unary("+", col("a"))),
        ("- -a", Unary("-", Unary("-", col("a")))),
        ("NOT a", Unary("NOT", col("a"))),
    ],
)
def test_literals_and_unary(text: str, node: ast.Expr) -> None:
    assert expr(text) == node


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("a OR b AND c", Binary("OR", col("a"), Binary("AND", col("b"), col("c")))),
        ("a AND b OR c", Binary("OR", Binary("AND", col("a"), col("b")), col("c"))),
        ("NOT a = b", Unary("NOT", Binary("=", col("a"), col("b")))),
        ("NOT a AND b", Binary("AND", Unary("NOT", col("a")), col("b"))),
        (
            "a = b + c * d",
            Binary("=", col("a"), Binary("+", col("b"), Binary("*", col("c"), col("d")))),
        ),
        ("a - b - c", Binary("-", Binary("-", col("a"), col("b")), col("c"))),
        ("a - (b - c)", Binary("-", col("a"), Binary("-", col("b"), col("c")))),
        ("a || b + c", Binary("+", Binary("||", col("a"), col("b")), col("c"))),
        ("-a * b", Binary("*", Unary("-", col("a")), col("b"))),
        ("a % b / c", Binary("/", Binary("%", col("a"), col("b")), col("c"))),
        ("a != b", Binary("<>", col("a"), col("b"))),
        ("a <> b", Binary("<>", col("a"), col("b"))),
        ("a <= b", Binary("<=", col("a"), col("b"))),
        ("a >= b", Binary(">=", col("a"), col("b"))),
        ("a < b", Binary("<", col("a"), col("b"))),
        ("a IS NULL", IsNull(col("a"))),
        ("a IS NOT NULL", IsNull(col("a"), True)),
        ("a IN (1, 2)", InList(col("a"), (lit(1), lit(2)))),
        ("a NOT IN ('x')", InList(col("a"), (lit("x"),), True)),
        ("a BETWEEN 1 AND 2 AND b", Binary("AND", Between(col("a"), lit(1), lit(2)), col("b"))),
        (
            "a NOT BETWEEN b + 1 AND c",
            Between(col("a"), Binary("+", col("b"), lit(1)), col("c"), True),
        ),
        ("a LIKE 'x%'", Like(col("a"), lit("x%"))),
        ("a NOT LIKE b || '%'", Like(col("a"), Binary("||", col("b"), lit("%")), True)),
        ("a = 1 IS NULL", IsNull(Binary("=", col("a"), lit(1)))),
        ("CASE WHEN a THEN 1 ELSE 2 END", Case(None, ((col("a"), lit(1)),), lit(2))),
        (
            "CASE a WHEN 1 THEN 'x' WHEN 2 THEN 'y' END",
            Case(col("a"), ((lit(1), lit("x")), (lit(2), lit("y")))),
        ),
        ("CAST(a AS bigint)", Cast(col("a"), "BIGINT")),
        ("COUNT(*)", FuncCall("count", (), star=True)),
        ("count(DISTINCT x)", FuncCall("count", (col("x"),), distinct=True)),
        ("Now()", FuncCall("now")),
        ("date_trunc('day', time)", FuncCall("date_trunc", (lit("day"), col("time")))),
        ("kdb_rev('t', 1)", FuncCall("kdb_rev", (lit("t"), lit(1)))),
        ("coalesce(a, b, 0)", FuncCall("coalesce", (col("a"), col("b"), lit(0)))),
        ("(a)", col("a")),
        ("((a + b))", Binary("+", col("a"), col("b"))),
        ("t.a", col("a", "t")),
        ('"T"."A b"', col("A b", "T")),
    ],
)
def test_expressions(text: str, node: ast.Expr) -> None:
    assert expr(text) == node


# ---------------------------------------------------------------------------------------
# Scripts, parameters, comments, caching
# ---------------------------------------------------------------------------------------


def test_script_sources_and_empty_statements() -> None:
    script = parse("  BEGIN ;; INSERT INTO t VALUES (1);\n\n COMMIT;  ")
    assert script.statements == (Begin(), Insert("t", rows=((lit(1),),)), Commit())
    assert script.sources == ("BEGIN", "INSERT INTO t VALUES (1)", "COMMIT")
    assert parse("") == ast.ParsedScript((), 0, ())
    assert parse(" ; ;\n-- nothing\n").statements == ()


def test_semicolons_inside_strings_and_names_do_not_split() -> None:
    script = parse("SELECT 'a;b' AS \";\"; SELECT 2")
    assert script.sources == ("SELECT 'a;b' AS \";\"", "SELECT 2")


def test_params_count_across_the_script_in_text_order() -> None:
    script = parse("SELECT ? FROM t WHERE a = ? AND b IN (?, ?); UPDATE t SET a = ? WHERE b = ?")
    assert script.param_count == 6
    first, second = script.statements
    assert isinstance(first, ast.Select)
    assert first.items[0].expr == Param(0)
    assert first.where == Binary(
        "AND", Binary("=", col("a"), Param(1)), InList(col("b"), (Param(2), Param(3)))
    )
    assert second == Update("t", (("a", Param(4)),), Binary("=", col("b"), Param(5)))
    assert parse("SELECT '?', \"?\" -- ?\n").param_count == 0


def test_comments_are_ignored() -> None:
    text = "SELECT /* a comment; with ' and \" */ a -- trailing ; comment\nFROM t /* x */"
    assert one(text) == Select((SelectItem(col("a")),), TableSource("t"))


def test_lines_and_columns_count_from_one_across_lines() -> None:
    with pytest.raises(SqlSyntaxError) as caught:
        parse("SELECT a\nFROM t\nWHERE a = = 1")
    assert (caught.value.line, caught.value.column) == (3, 11)
    assert caught.value.details() == {"position": {"line": 3, "column": 11}}


def test_parse_cached_returns_the_same_result() -> None:
    text = "SELECT a FROM t WHERE b = ?"
    assert parse_cached(text) is parse_cached(text)
    assert parse_cached(text) == parse(text)
    with pytest.raises(SqlSyntaxError):
        parse_cached("SELECT FROM")


def test_parallel_parses_number_their_own_params() -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            text = "INSERT INTO t VALUES " + ", ".join(["(?, ?)"] * n)
            for _ in range(200):
                script = parse(text)
                assert script.param_count == 2 * n
                inserted = script.statements[0]
                assert isinstance(inserted, ast.Insert) and inserted.rows is not None
                assert inserted.rows[-1] == (Param(2 * n - 2), Param(2 * n - 1))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_grammar_has_no_conflicts() -> None:
    from lark.common import ParserConf
    from lark.parsers.lalr_analysis import LALR_Analyzer

    from refimpl.sql.parser import _LARK

    # strict: a shift/reduce conflict (silently resolved as shift otherwise) is an error.
    LALR_Analyzer(ParserConf(_LARK.rules, {}, ["script"]), strict=True).compute_lalr()


def test_error_descriptions_use_the_grammar_items() -> None:
    # The items are rebuilt from lark internals; if a lark upgrade breaks that, messages lose
    # "a table name" and similar words (they fall back to listing terminals): fail loudly here.
    with pytest.raises(SqlSyntaxError, match="expected a table name$"):
        parse("SELECT a FROM")


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

ERRORS: list[tuple[str, str]] = [
    ("SELECT a, FROM t", "line 1, column 11: expected an expression after ',' but found 'FROM'"),
    (
        "CREATE TABLE t (a INT, )",
        "line 1, column 24: expected a column name after ',' but found ')'",
    ),
    (
        "SELECT a FROM t WHERE b = 'abc",
        "line 1, column 27: unterminated string literal starting here",
    ),
    (
        "SELECT (",
        "line 1, column 9: unexpected end of input: expected an expression or a query"
        " (SELECT, VALUES or WITH)",
    ),
    ("SELECT a FROM", "line 1, column 14: unexpected end of input: expected a table name"),
    ("DROP TABLE", "line 1, column 11: unexpected end of input: expected a table name"),
    (
        "CREATE TABLE t (a FLOT)",
        "line 1, column 19: expected a type such as INT or STRING but found 'FLOT'",
    ),
    (
        "SELECT CAST(a AS txt) FROM t",
        "line 1, column 18: expected a type such as INT or STRING after 'AS' but found 'txt'",
    ),
    ("FOO BAR", "line 1, column 1: expected a keyword such as SELECT or INSERT but found 'FOO'"),
    (
        "BEGIN; COMIT",
        "line 1, column 8: expected a keyword such as SELECT or INSERT after ';' but found 'COMIT'",
    ),
    ("SELECT a FROM t ORDER a", "line 1, column 23: expected BY after 'ORDER' but found 'a'"),
    ("DELETE t", "line 1, column 8: expected FROM after 'DELETE' but found 't'"),
    (
        "UPDATE t SET WHERE a = 1",
        "line 1, column 14: expected a column name after 'SET' but found 'WHERE'",
    ),
    (
        "INSERT INTO t (a, b) VALUS (1, 2)",
        "line 1, column 22: expected SELECT, VALUES or WITH after ')' but found 'VALUS'",
    ),
    (
        "INSERT INTO t VALUES (1, 2",
        "line 1, column 27: unexpected end of input: expected an operator, ')' or ','",
    ),
    ("SELECT a AS FROM t", "line 1, column 13: expected an alias after 'AS' but found 'FROM'"),
    (
        "SELECT a FROM t WHERE a = = 1",
        "line 1, column 27: expected an expression after '=' but found '='",
    ),
    (
        "GRANT SELECT ON t TO",
        "line 1, column 21: unexpected end of input: expected a user name or PUBLIC",
    ),
    (
        "GRANT ALL ON DATABASE d TO u",
        "line 1, column 7: expected ADMIN, READ, SELECT or WRITE after 'GRANT' but found 'ALL'",
    ),
    (
        "CREATE TABLE t (a INT) PARTITION BY WEEK",
        "line 1, column 37: expected DAY, MONTH, NONE or YEAR after 'BY' but found 'WEEK'",
    ),
    ("ALTER TABLE t ADD c INT", "line 1, column 19: expected COLUMN after 'ADD' but found 'c'"),
    ("SELECT count(*, a) FROM t", "line 1, column 15: expected ')' after '*' but found ','"),
    (
        "SELECT 1\nSELECT 2",
        "line 2, column 1: expected ';' before 'SELECT': statements are separated by ';'",
    ),
    ("SELECT # FROM t", "line 1, column 8: unexpected character '#'"),
    ("SELECT a FROM t /* open", "line 1, column 17: unterminated comment starting here"),
    ('SELECT "abc FROM t', "line 1, column 8: unterminated quoted name starting here"),
    (
        'SELECT "" FROM t',
        "line 1, column 8: a quoted name cannot be empty: write at least one "
        "character between the double quotes",
    ),
    (
        "CREATE TABLE t (a INT PRIMARY KEY, b INT PRIMARY KEY)",
        "line 1, column 42: a table has one primary key: declare a key of several columns as "
        "PRIMARY KEY (a, b) after the columns",
    ),
    ("CREATE TABLE t (PRIMARY KEY (a))", "line 1, column 17: a table needs at least one column"),
    (
        "SELECT * FROM a\n  NATURAL JOIN b ON a.x = b.x",
        "line 2, column 18: expected a clause (WHERE, GROUP BY, ...), ',' or the end of the"
        " statement but found 'ON'",
    ),
    ("SELECT * FROM a JOIN b", "line 1, column 23: unexpected end of input: expected ON or USING"),
    (
        "SELECT * FROM a LEFT b",
        "line 1, column 22: expected JOIN or OUTER after 'LEFT' but found 'b'",
    ),
    (
        "SELECT a FROM t LIMIT 5, 10",
        "line 1, column 24: LIMIT m, n is not supported: write LIMIT n OFFSET m",
    ),
    (
        "SELECT a FROM t WHERE a BETWEEN 1",
        "line 1, column 34: unexpected end of input: expected AND or an operator",
    ),
    (
        "SELECT a FROM t WHERE x = 1 )",
        "line 1, column 29: expected the end of the statement but found ')'",
    ),
    (
        "SELECT * FROM t WERE id = 1",
        "line 1, column 22: expected a clause (WHERE, GROUP BY, ...), "
        "',' or the end of the statement after 'WERE' but found 'id'",
    ),
    (
        "DELETE FROM t; UPDATE t SET id = 2 WERE id = 1",
        "line 1, column 36: expected ',', RETURNING, WHERE or the end of the statement but"
        " found 'WERE'",
    ),
    (
        "SELECT a FROM 'abc'",
        "line 1, column 15: expected a table name after 'FROM' but found the string 'abc'",
    ),
    ("SELECT " + "9" * 5000, "line 1, column 8: this number has too many digits"),
    ("SELECT a\u00a0FROM t", "line 1, column 9: unexpected character U+00A0"),
    (
        "DROP TOKEN abc",
        "line 1, column 12: expected FOR or a string such as 'abc' after 'TOKEN' but found 'abc'",
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[t[:40] for t, _ in ERRORS])
def test_error_messages(text: str, message: str) -> None:
    with pytest.raises(SqlSyntaxError) as caught:
        parse(text)
    error = caught.value
    assert error.message == message
    assert message.startswith(f"line {error.line}, column {error.column}: ")


_INTERNALS = re.compile(
    r"__ANON|\$END|\bRPAR\b|\bLPAR\b|\bCOMMA\b|\bSEMI\b|IDENT|Token\(|"
    r"\bNUMBER\b|\bRULE\b|\b[a-z]+_[a-z_]+\b"
)
_VOCABULARY = [
    "SELECT",
    "FROM",
    "WHERE",
    "t",
    "a",
    "b",
    "(",
    ")",
    ",",
    ";",
    "*",
    "=",
    "<>",
    "'x'",
    "1",
    "2.5",
    "?",
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "IN",
    "BETWEEN",
    "LIKE",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "AS",
    "INT",
    "CREATE",
    "TABLE",
    "PRIMARY",
    "KEY",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "ORDER",
    "BY",
    "DESC",
    "LIMIT",
    "OFFSET",
    "GROUP",
    "HAVING",
    "DROP",
    "IF",
    "EXISTS",
    "ALTER",
    "ADD",
    "COLUMN",
    "GRANT",
    "ON",
    "TO",
    "PUBLIC",
    "SHOW",
    "TABLES",
    "PARTITION",
    "YEAR",
    "SYMBOL",
    "'",
    '"',
    "/*",
    "--",
    ".",
    "-",
    "+",
    "||",
    "JOIN",
    "WITH",
    "UNION",
    "count",
    "BEGIN",
    "COMMIT",
    "SUBSCRIBE",
    "TIMESERIES",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_VOCABULARY), max_size=14))
def test_any_token_soup_parses_or_fails_with_a_readable_message(words: list[str]) -> None:
    text = " ".join(words)
    try:
        parse(text)
    except SqlSyntaxError as error:
        assert re.match(r"line \d+, column \d+: \S", error.message), error.message
        assert error.line is not None and error.line >= 1
        assert error.column is not None and error.column >= 1
        assert not _INTERNALS.search(error.message.replace(text, "")), error.message
        assert "\n" not in error.message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_parses_or_raises_a_syntax_error(text: str) -> None:
    try:
        parse(text)
    except SqlSyntaxError as error:
        assert error.message.startswith(f"line {error.line}, column {error.column}: ")
