"""ast nodes -> canonical SQL, and `parse(to_sql(x)) == x` for random nodes of every kind."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.sql import ast
from refimpl.sql.ast import (
    Between,
    Binary,
    Case,
    Cast,
    ColumnDef,
    ColumnRef,
    CreateTable,
    FuncCall,
    InList,
    IsNull,
    Like,
    Literal,
    Param,
    Unary,
)
from refimpl.sql.ast_calls import KEYWORD_ONLY, VALUE_WORDS
from refimpl.sql.parser import KEYWORDS, parse
from refimpl.sql.printer import quote_name, to_sql
from tests.sql.statements import STATEMENTS

# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

_WORDS = sorted(
    KEYWORDS
    | VALUE_WORDS  # names only where no expression starts
    | {
        "key",
        "op",
        "seq",
        "lsn",
        "time",
        "symbol",
        "first",
        "last",
        "value",
        "timestamp",
        "name",
        "table",
        "public",
        "PUBLIC",
    }
)

names = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True),
    st.sampled_from(_WORDS).flatmap(lambda w: st.sampled_from([w, w.lower(), w.capitalize()])),
    st.text(min_size=1, max_size=6),
)
# Function and setting names are lower-cased by the parser.
lower_names = names.map(str.lower).filter(lambda s: s.lower() == s)
maybe = st.none
types = st.sampled_from(ast.TYPES)

literals = st.one_of(
    # Literals within the types' ranges (spec: types-and-values): past them is an error.
    st.integers(-(2**63), 2**63 - 1).map(lambda v: Literal(v, "INT")),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: Literal(v, "DOUBLE")),
    st.text(max_size=8).map(lambda v: Literal(v, "STRING")),
    st.booleans().map(lambda v: Literal(v, "BOOLEAN")),
    st.just(Literal(None, "NULL")),
)
columns = st.builds(ColumnRef, names, st.one_of(maybe(), names))
# Indices are set afterwards (see `numbered`), in text order as the parser counts them.
params = st.just(Param(0))

_BINARY_OPS = ["+", "-", "*", "/", "%", "||", "=", "<>", "<", "<=", ">", ">=", "AND", "OR"]


def _is_number(node: ast.Expr) -> bool:
    return isinstance(node, Literal) and node.type in ("INT", "DOUBLE")


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    lists = st.lists(children, min_size=1, max_size=3).map(tuple)
    return st.one_of(
        st.builds(Binary, st.sampled_from(_BINARY_OPS), children, children),
        st.builds(Unary, st.just("NOT"), children),
        st.builds(Unary, st.just("+"), children),
        # `-5` is read as the literal -5, so a minus before a number never reaches the tree.
        st.builds(Unary, st.just("-"), children.filter(lambda c: not _is_number(c))),
        st.builds(IsNull, children, st.booleans()),
        st.builds(InList, children, lists, st.booleans()),
        st.builds(Between, children, children, children, st.booleans()),
        st.builds(Like, children, children, st.booleans()),
        st.builds(
            Case,
            st.one_of(maybe(), children),
            st.lists(st.tuples(children, children), min_size=1, max_size=2).map(tuple),
            st.one_of(maybe(), children),
        ),
        st.builds(Cast, children, types),
        # A call by a name that is only a keyword (`user()`) is refused: no parse makes one.
        st.builds(
            FuncCall,
            lower_names.filter(lambda name: name not in KEYWORD_ONLY),
            st.lists(children, max_size=3).map(tuple),
        ),
        st.builds(FuncCall, lower_names, st.just(()), st.just(False), st.just(True)),
        st.builds(FuncCall, lower_names, lists, st.just(True)),
    )


expressions = st.recursive(st.one_of(literals, columns, params), _extend, max_leaves=12)
expr_tuples = st.lists(expressions, min_size=1, max_size=3).map(tuple)
name_tuples = st.lists(names, min_size=1, max_size=3).map(tuple)

select_items = st.one_of(
    st.builds(ast.SelectItem, expressions, st.one_of(maybe(), names)),
    st.builds(ast.SelectItem, st.builds(ast.Star, st.one_of(maybe(), names))),
)
sources = st.one_of(
    maybe(),
    st.builds(ast.TableSource, names, st.one_of(maybe(), names)),
    st.builds(
        ast.FunctionSource,
        lower_names,
        st.lists(expressions, max_size=3).map(tuple),
        st.one_of(maybe(), names),
    ),
)
order_items = st.builds(
    ast.OrderItem, expressions, st.booleans(), st.one_of(maybe(), st.booleans())
)


@st.composite
def selects(draw: st.DrawFn) -> ast.Select:
    limit = draw(st.one_of(maybe(), expressions))
    return ast.Select(
        items=draw(st.lists(select_items, min_size=1, max_size=3).map(tuple)),
        source=draw(sources),
        where=draw(st.one_of(maybe(), expressions)),
        group_by=draw(st.lists(expressions, max_size=2).map(tuple)),
        having=draw(st.one_of(maybe(), expressions)),
        order_by=draw(st.lists(order_items, max_size=2).map(tuple)),
        limit=limit,
        offset=draw(st.one_of(maybe(), expressions)) if limit is not None else None,
        distinct=draw(st.booleans()),
    )


@st.composite
def create_tables(draw: st.DrawFn) -> CreateTable:
    unit = draw(st.one_of(maybe(), st.sampled_from(["NONE", "YEAR", "MONTH", "DAY"])))
    columns = draw(st.lists(st.builds(ColumnDef, names, types), min_size=1, max_size=4))
    key = draw(
        st.one_of(
            st.just(()),
            st.sampled_from(columns).map(lambda c: (c.name,)),  # printed on its column
            name_tuples,
        )
    )
    return CreateTable(
        name=draw(names),
        columns=tuple(columns),
        if_not_exists=draw(st.booleans()),
        primary_key=key,
        timeseries=draw(st.one_of(maybe(), names)),
        partition_by=unit,
        partition_symbol=draw(st.one_of(maybe(), names)) if unit else None,
        sort_by=draw(st.one_of(st.just(()), name_tuples)),
        dedup_key=draw(st.one_of(st.just(()), name_tuples)),
    )


# -- queries of several tables -----------------------------------------------------------

plain_selects = st.builds(
    ast.Select,
    st.lists(select_items, min_size=1, max_size=2).map(tuple),
    sources,
    st.one_of(maybe(), expressions),
)
values_lists = st.builds(ast.Values, st.lists(expr_tuples, min_size=1, max_size=2).map(tuple))
subquery_exprs = st.one_of(
    st.builds(ast.ScalarSubquery, plain_selects),
    st.builds(ast.Exists, plain_selects),
    st.builds(ast.InSubquery, expressions, plain_selects, st.booleans()),
    st.builds(
        ast.Quantified,
        st.sampled_from(["=", "<>", "<", "<=", ">", ">="]),
        expressions,
        st.sampled_from(["ANY", "ALL"]),
        plain_selects,
    ),
)
table_sources = st.one_of(
    st.builds(ast.TableSource, names, st.one_of(maybe(), names)),
    st.builds(ast.SubquerySource, st.one_of(plain_selects, values_lists), maybe()),
    st.builds(ast.SubquerySource, plain_selects, names, st.one_of(st.just(()), name_tuples)),
)


@st.composite
def joins(draw: st.DrawFn) -> ast.JoinSource:
    source: ast.Source = draw(table_sources)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL", "CROSS"]))
        right = draw(table_sources)
        if kind == "CROSS":
            source = ast.JoinSource(kind, source, right)
        elif draw(st.booleans()):
            source = ast.JoinSource(kind, source, right, draw(expressions))
        else:
            source = ast.JoinSource(kind, source, right, using=draw(name_tuples))
    return source  # type: ignore[return-value]


@st.composite
def compound_queries(draw: st.DrawFn) -> ast.Query:
    operands = st.one_of(plain_selects, values_lists)
    query: ast.Query = draw(operands)
    for _ in range(draw(st.integers(1, 3))):
        query = ast.SetOperation(
            draw(st.sampled_from(["UNION", "INTERSECT", "EXCEPT"])),
            query,
            draw(operands),
            draw(st.booleans()),
        )
    limit = draw(st.one_of(maybe(), expressions))
    ordered: dict[str, Any] = {  # every kind of query has these three
        "order_by": draw(st.lists(order_items, max_size=2).map(tuple)),
        "limit": limit,
        "offset": draw(st.one_of(maybe(), expressions)) if limit is not None else None,
    }
    query = dataclasses.replace(query, **ordered)
    if draw(st.booleans()):
        tables = draw(
            st.lists(
                st.builds(
                    ast.CommonTable, names, plain_selects, st.one_of(st.just(()), name_tuples)
                ),
                min_size=1,
                max_size=2,
            ).map(tuple)
        )
        query = ast.WithQuery(tables, query, draw(st.booleans()))
    return query


queries = st.one_of(
    compound_queries(),
    values_lists,
    st.builds(
        ast.Select,
        st.lists(select_items, min_size=1, max_size=2).map(tuple),
        joins(),
        st.one_of(maybe(), expressions, subquery_exprs),
    ),
    st.builds(
        ast.Select,
        st.lists(st.builds(ast.SelectItem, subquery_exprs), min_size=1, max_size=2).map(tuple),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        queries,
        st.builds(ast.Subscribe, queries),
        st.builds(
            ast.Insert,
            names,
            st.one_of(maybe(), name_tuples),
            st.none(),
            queries.filter(lambda q: not isinstance(q, ast.Values)),
        ),
        st.builds(ast.CreateView, names, queries, st.booleans()),
        st.builds(ast.DropView, names, st.booleans()),
    )
)
def test_queries_round_trip(node: ast.Statement) -> None:
    round_trip(numbered(node))


grantees = st.one_of(names, st.just(ast.PUBLIC))
roles = st.sampled_from(["READ", "WRITE", "ADMIN"])
texts = st.text(max_size=8)

statements = st.one_of(
    selects(),
    st.builds(ast.Subscribe, selects()),
    st.builds(
        ast.Insert,
        names,
        st.one_of(maybe(), name_tuples),
        st.lists(expr_tuples, min_size=1, max_size=3).map(tuple),
    ),
    st.builds(ast.Insert, names, st.one_of(maybe(), name_tuples), st.none(), selects()),
    st.builds(
        ast.Update,
        names,
        st.lists(st.tuples(names, expressions), min_size=1, max_size=3).map(tuple),
        st.one_of(maybe(), expressions),
    ),
    st.builds(ast.Delete, names, st.one_of(maybe(), expressions)),
    create_tables(),
    st.builds(ast.DropTable, names, st.booleans()),
    st.builds(ast.Truncate, names),
    st.builds(ast.AddColumn, names, st.builds(ColumnDef, names, types)),
    st.builds(ast.DropColumn, names, names),
    st.builds(ast.DropPartitionList, names, st.lists(texts, min_size=1, max_size=3).map(tuple)),
    st.builds(ast.DropPartitionWhere, names, expressions),
    st.builds(ast.CreateDatabase, names, st.booleans()),
    st.builds(ast.DropDatabase, names, st.booleans()),
    st.builds(ast.AlterDatabaseSet, names, lower_names, texts),
    st.sampled_from(
        [
            ast.Begin(),
            ast.Commit(),
            ast.Rollback(),
            ast.Checkpoint(),
            ast.ShowTables(),
            ast.ShowUsers(),
        ]
    ),
    st.builds(ast.ShowColumns, names),
    st.builds(ast.ShowCreateTable, names),
    st.builds(ast.ShowGrants, names),
    st.builds(ast.CreateUser, names, st.booleans()),
    st.builds(ast.DropUser, names, st.booleans()),
    st.builds(ast.CreateToken, names, st.one_of(maybe(), texts)),
    st.builds(ast.DropToken, texts),
    st.builds(ast.DropToken, st.none(), names),
    st.builds(ast.GrantRole, roles, names, grantees),
    st.builds(ast.RevokeRole, roles, names, grantees),
    st.builds(ast.GrantSelect, names, grantees),
    st.builds(ast.RevokeSelect, names, grantees),
)


def numbered(node: Any, counter: itertools.count | None = None) -> Any:
    """`node` with its Params numbered 0, 1, 2... in field order, which is text order."""
    counter = counter if counter is not None else itertools.count()
    if isinstance(node, Param):
        return Param(next(counter))
    if isinstance(node, tuple):
        return tuple(numbered(item, counter) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {
            f.name: numbered(getattr(node, f.name), counter)
            for f in dataclasses.fields(node)
            if f.init
        }
        return type(node)(**changes)
    return node


def count_params(node: Any) -> int:
    if isinstance(node, Param):
        return 1
    if isinstance(node, tuple):
        return sum(count_params(item) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return sum(count_params(getattr(node, f.name)) for f in dataclasses.fields(node))
    return 0


def round_trip(node: ast.Statement) -> None:
    text = to_sql(node)
    script = parse(text)
    assert script.statements == (node,), text
    assert script.param_count == count_params(node)
    assert to_sql(script.statements[0]) == text  # the canonical text is a fixed point


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_expressions_round_trip(node: ast.Expr) -> None:
    round_trip(numbered(ast.Select((ast.SelectItem(node),))))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements)
def test_statements_round_trip(node: ast.Statement) -> None:
    round_trip(numbered(node))


@settings(max_examples=300, deadline=None)
@given(names)
def test_names_read_back_in_every_position(name: str) -> None:
    n = name
    q = quote_name(name)
    cases = [
        (
            f"SELECT {q}.{q} AS {q}, {q}.* FROM {q} AS {q} ORDER BY {q}",
            ast.Select(
                (ast.SelectItem(ColumnRef(n, n), n), ast.SelectItem(ast.Star(n))),
                ast.TableSource(n, n),
                order_by=(ast.OrderItem(ColumnRef(n)),),
            ),
        ),
        (
            f"CREATE TABLE {q} ({q} INT PRIMARY KEY) TIMESERIES({q})",
            CreateTable(n, (ColumnDef(n, "INT"),), primary_key=(n,), timeseries=n),
        ),
        (f"GRANT SELECT ON TABLE {q} TO {q}", ast.GrantSelect(n, n)),
        (f"GRANT SELECT ON {q} TO {q}", ast.GrantSelect(n, n)),
        (f"DROP TABLE IF EXISTS {q}", ast.DropTable(n, True)),
        (f"DROP TABLE {q}", ast.DropTable(n)),
        (f"TRUNCATE {q}", ast.Truncate(n)),
        (f"UPDATE {q} SET {q} = {q}", ast.Update(n, ((n, ColumnRef(n)),))),
        (f"INSERT INTO {q} ({q}) VALUES ({q})", ast.Insert(n, (n,), ((ColumnRef(n),),))),
        (f"ALTER TABLE {q} ADD COLUMN {q} INT", ast.AddColumn(n, ColumnDef(n, "INT"))),
        (f"SHOW GRANTS FOR {q}", ast.ShowGrants(n)),
        (f"CREATE USER IF NOT EXISTS {q}", ast.CreateUser(n, True)),
    ]
    for text, node in cases:
        assert parse(text).statements == (node,), text


@pytest.mark.parametrize("text", [text for text, _ in STATEMENTS])
def test_examples_print_and_parse_back(text: str) -> None:
    round_trip(parse(text).statements[0])


# ---------------------------------------------------------------------------------------
# Exact text
# ---------------------------------------------------------------------------------------


def test_create_table_layout() -> None:
    node = parse("create table acct (id int primary key, name string, bal double)").statements[0]
    assert to_sql(node) == (
        "CREATE TABLE acct (\n  id INT PRIMARY KEY,\n  name STRING,\n  bal DOUBLE\n)"
    )
    node = parse(
        "CREATE TABLE IF NOT EXISTS candles (time TIMESTAMP, symbol SYMBOL, close DOUBLE,"
        " PRIMARY KEY (symbol, time)) TIMESERIES(time) PARTITION BY YEAR, SYMBOL(symbol)"
        " SORT BY (symbol, time) DEDUP KEY (symbol, time)"
    ).statements[0]
    assert to_sql(node) == (
        "CREATE TABLE IF NOT EXISTS candles (\n"
        "  time TIMESTAMP,\n"
        "  symbol SYMBOL,\n"
        "  close DOUBLE,\n"
        "  PRIMARY KEY (symbol, time)\n"
        ") TIMESERIES(time) PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time)"
        " DEDUP KEY (symbol, time)"
    )


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        (
            "select a from t where not (a = 1 or b <> 2)",
            "SELECT a FROM t WHERE NOT (a = 1 OR b <> 2)",
        ),
        (
            "SELECT (a + b) * c, a + (b * c), (a - b) - c, a - (b - c)",
            "SELECT (a + b) * c, a + b * c, a - b - c, a - (b - c)",
        ),
        ("SELECT -(a + 1), - -a, 1 - -1, -(-(2))", "SELECT -(a + 1), - -a, 1 - -1, 2"),
        (
            'SELECT a != b, \'it\'\'s\', "a""b", "from", "Key", key',
            'SELECT a <> b, \'it\'\'s\', "a""b", "from", Key, key',
        ),
        (
            "SELECT count(*), COUNT(DISTINCT a), Coalesce(a, 0) AS c FROM changes('t', 5) x",
            "SELECT count(*), count(DISTINCT a), coalesce(a, 0) AS c FROM changes('t', 5) AS x",
        ),
        ("SELECT 0.1, 1e300, 1E-7, .5", "SELECT 0.1, 1e+300, 1e-07, 0.5"),
        (
            "SELECT a FROM t ORDER BY a ASC NULLS LAST, b DESC LIMIT 1 OFFSET 2",
            "SELECT a FROM t ORDER BY a NULLS LAST, b DESC LIMIT 1 OFFSET 2",
        ),
        (
            "SELECT CASE WHEN a IS NOT NULL THEN CAST(a AS string) END",
            "SELECT CASE WHEN a IS NOT NULL THEN CAST(a AS STRING) END",
        ),
        ("GRANT SELECT ON t TO public", "GRANT SELECT ON TABLE t TO PUBLIC"),
        ('REVOKE READ ON DATABASE d FROM "public"', 'REVOKE READ ON DATABASE d FROM "public"'),
        ("ALTER DATABASE d SET WAL_ARCHIVE = '2GB'", "ALTER DATABASE d SET wal_archive = '2GB'"),
        ("truncate t", "TRUNCATE TABLE t"),
    ],
)
def test_canonical_text(text: str, printed: str) -> None:
    assert to_sql(parse(text).statements[0]) == printed


def test_quote_name() -> None:
    assert quote_name("price") == "price"
    assert quote_name("first") == "first"
    assert quote_name("select") == '"select"'
    assert quote_name("to") == '"to"'
    assert quote_name("a b") == '"a b"'
    assert quote_name('say "hi"') == '"say ""hi"""'
    assert quote_name("1st") == '"1st"'


def test_script_and_expression_printing() -> None:
    script = parse("BEGIN; INSERT INTO t VALUES (?, 'x'); COMMIT")
    assert to_sql(script) == "BEGIN;\nINSERT INTO t VALUES (?, 'x');\nCOMMIT"
    assert to_sql(Binary("*", Binary("+", ColumnRef("a"), Literal(1, "INT")), Param(0))) == (
        "(a + 1) * ?"
    )


def test_nodes_without_sql_text_are_refused() -> None:
    with pytest.raises(ValueError):
        to_sql(ast.Select((ast.SelectItem(Literal(1, "INT")),), offset=Literal(1, "INT")))
    with pytest.raises(ValueError):
        to_sql(Literal(float("nan"), "DOUBLE"))
    with pytest.raises(TypeError):
        to_sql(object())
