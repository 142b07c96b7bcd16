"""The SQL texts the SQL fuzz throws at /exec: grammar-shaped statements over the fuzz fixture's
tables, near-valid mutations of them, and hostile texts (`HOSTILE`: deep nesting, huge
literals, every type's edge values). `sql_texts()` mixes the three; tests/http/test_sql_fuzz.py
runs it briefly and tools/fuzz_sql.py for as long as asked.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

from refimpl.sql import ast
from refimpl.sql.printer import to_sql
from tests.http.fuzz_judge import TABLE_COLUMNS

TABLES = ["t", "k", "scratch1", "scratch2", "nope"]
COLUMNS = [*TABLE_COLUMNS, "nope", "c1"]
USERS = ["fuzz_u1", "fuzz_u2", "admin"]  # admin: statements about it must be refused or harmless
FUNCTIONS = [
    "length",
    "lower",
    "upper",
    "coalesce",
    "abs",
    "round",
    "now",
    "date_trunc",
    "kdb_rev",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "first",
    "last",
    "nope",
]

INT_EDGES = [
    0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63),
    -(2**63) - 1, 2**64, -(2**64), 10**40,
]  # fmt: skip
FLOAT_EDGES = [0.0, -0.0, 1.5, 1e308, -1e308, 5e-324, float("inf"), float("-inf")]
TIME_EDGES = [
    "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000001Z", "0000-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999Z", "10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z",
    "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999Z", "2026-02-30T00:00:00Z",
    "2026-01-01T24:00:00Z", "2026-01-01T00:00:00+99:00", "2026-01-01", "now", "",
]  # fmt: skip
STRING_EDGES = ["", "\x00", "a\x00b", "'", "%", "_", "é", "\U0001f600", "\\", "x" * 1000]

# ---------------------------------------------------------------------------------------
# Grammar-shaped statements: ast nodes over the fixture, printed
# ---------------------------------------------------------------------------------------

literals = st.one_of(
    st.sampled_from(INT_EDGES).map(lambda v: ast.Literal(v, "INT")),
    st.integers(-1000, 1000).map(lambda v: ast.Literal(v, "INT")),
    st.sampled_from(FLOAT_EDGES).map(lambda v: ast.Literal(v, "DOUBLE")),
    st.floats(allow_nan=False).map(lambda v: ast.Literal(v, "DOUBLE")),
    st.sampled_from(STRING_EDGES + TIME_EDGES).map(lambda v: ast.Literal(v, "STRING")),
    st.text(max_size=6).map(lambda v: ast.Literal(v, "STRING")),
    st.booleans().map(lambda v: ast.Literal(v, "BOOLEAN")),
    st.just(ast.Literal(None, "NULL")),
    # NaN has no literal; a CAST makes one.
    st.sampled_from(["NaN", "inf", "-inf", "-0"]).map(
        lambda v: ast.Cast(ast.Literal(v, "STRING"), "DOUBLE")
    ),
)
column_refs = st.sampled_from(COLUMNS).map(ast.ColumnRef)
leaves = st.one_of(literals, literals, column_refs, st.just(ast.Param(0)))
BINARY = ["+", "-", "*", "/", "%", "||", "=", "<>", "<", "<=", ">", ">=", "AND", "OR"]


def _extend(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    some = st.lists(inner, min_size=1, max_size=3).map(tuple)
    return st.one_of(
        st.builds(ast.Binary, st.sampled_from(BINARY), inner, inner),
        st.builds(ast.Unary, st.sampled_from(["NOT", "-", "+"]), inner),
        st.builds(ast.IsNull, inner, st.booleans()),
        st.builds(ast.InList, inner, some, st.booleans()),
        st.builds(ast.Between, inner, inner, inner, st.booleans()),
        st.builds(ast.Like, inner, inner, st.booleans()),
        st.builds(
            ast.Case,
            st.none() | inner,
            st.lists(st.tuples(inner, inner), min_size=1, max_size=2).map(tuple),
            st.none() | inner,
        ),
        st.builds(ast.Cast, inner, st.sampled_from(ast.TYPES)),
        st.builds(ast.FuncCall, st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3).map(tuple)),
        st.builds(
            ast.FuncCall,
            st.sampled_from(["count", "nope"]),
            st.just(()),
            st.just(False),
            st.just(True),
        ),
        st.builds(ast.FuncCall, st.sampled_from(["count", "sum", "min"]), some, st.just(True)),
    )


expressions = st.recursive(leaves, _extend, max_leaves=8)
_optional = st.none() | expressions


@st.composite
def selects(draw: st.DrawFn) -> ast.Select:
    source = draw(
        st.sampled_from(TABLES).map(ast.TableSource)
        | st.builds(
            ast.FunctionSource,
            st.sampled_from(["changes", "nope"]),
            st.lists(literals | st.just(ast.Literal("t", "STRING")), max_size=3).map(tuple),
        )
        | st.none()
    )
    items = st.builds(ast.SelectItem, expressions, st.none() | st.sampled_from(["x", "id"]))
    limit = draw(_optional)
    return ast.Select(
        items=draw(
            st.lists(items | st.just(ast.SelectItem(ast.Star())), min_size=1, max_size=3).map(tuple)
        ),
        source=source,
        where=draw(_optional),
        group_by=draw(st.lists(expressions, max_size=2).map(tuple)),
        having=draw(_optional),
        order_by=draw(
            st.lists(
                st.builds(ast.OrderItem, expressions, st.booleans(), st.none() | st.booleans()),
                max_size=2,
            ).map(tuple)
        ),
        limit=limit,
        offset=draw(_optional) if limit is not None else None,
        distinct=draw(st.booleans()),
    )


@st.composite
def inserts(draw: st.DrawFn) -> ast.Insert:
    table = draw(st.sampled_from(["t", "t", "k", "nope"]))
    names = draw(
        st.none()
        | st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=4, unique=True).map(tuple)
    )
    width = len(names) if names else draw(st.sampled_from([3, 7]))
    # Mostly as many values as columns, sometimes one too many or too few.
    width = max(1, width + draw(st.sampled_from([0, 0, 0, 0, 1, -1])))
    row = st.lists(literals | expressions, min_size=width, max_size=width).map(tuple)
    if draw(st.integers(0, 4)) == 0:
        return ast.Insert(table, names, select=draw(selects()))
    return ast.Insert(table, names, draw(st.lists(row, min_size=1, max_size=3).map(tuple)))


column_defs = st.builds(ast.ColumnDef, st.sampled_from(COLUMNS), st.sampled_from(ast.TYPES))
scratch = st.sampled_from(["scratch1", "scratch2"])
users = st.sampled_from(USERS)


def statements() -> st.SearchStrategy[ast.Statement]:
    """Statements over the fixture; never one that drops the fuzzed database or the admin's
    access (the fuzz needs both), though statements about them that must fail are made."""
    other_databases = st.sampled_from(["fuzz_other", "demo", "nope"])
    return st.one_of(
        selects(),
        selects(),
        inserts(),
        inserts(),
        st.builds(
            ast.Update,
            st.sampled_from(["t", "k"]),
            st.lists(st.tuples(st.sampled_from(COLUMNS), expressions), min_size=1, max_size=2).map(
                tuple
            ),
            _optional,
        ),
        st.builds(ast.Delete, st.sampled_from(["t", "k"]), expressions),
        st.builds(ast.Subscribe, selects()),
        st.builds(
            ast.CreateTable,
            scratch,
            st.lists(column_defs, min_size=1, max_size=3).map(tuple),
            st.booleans(),
        ),
        st.builds(ast.DropTable, scratch, st.booleans()),
        st.builds(ast.Truncate, scratch),
        st.builds(ast.AddColumn, st.sampled_from(["t", "scratch1"]), column_defs),
        st.builds(
            ast.DropColumn, st.sampled_from(["t", "scratch1"]), st.sampled_from(["c1", "nope"])
        ),
        st.builds(
            ast.DropPartitionList,
            st.just("k"),
            st.lists(
                st.sampled_from(["2026-01-01", "0001-01-01", "9999-12-31", "x", ""]),
                min_size=1,
                max_size=2,
            ).map(tuple),
        ),
        st.builds(ast.DropPartitionWhere, st.just("k"), expressions),
        st.builds(ast.CreateDatabase, st.just("fuzz_other"), st.booleans()),
        st.builds(ast.DropDatabase, st.sampled_from(["fuzz_other", "nope"]), st.just(True)),
        st.builds(
            ast.AlterDatabaseSet,
            other_databases,
            st.sampled_from(["wal_archive", "nope"]),
            st.sampled_from(["2GB", "0", "-1", "1TB", "99999999999999999999GB", "x", ""]),
        ),
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
        st.builds(ast.ShowColumns, st.sampled_from(TABLES)),
        st.builds(ast.ShowCreateTable, st.sampled_from(TABLES)),
        st.builds(ast.ShowGrants, users),
        st.builds(ast.CreateUser, users, st.booleans()),
        st.builds(ast.DropUser, st.sampled_from(USERS[:2]), st.booleans()),
        st.builds(
            ast.CreateToken,
            users,
            st.none() | st.sampled_from(["30d", "0s", "-1d", "x", "99999999999d"]),
        ),
        st.builds(ast.DropToken, st.none(), st.sampled_from(USERS[:2])),
        st.builds(
            ast.GrantRole,
            st.sampled_from(["READ", "WRITE"]),
            other_databases,
            st.sampled_from(USERS[:2]),
        ),
        st.builds(
            ast.RevokeRole,
            st.sampled_from(["READ", "WRITE", "ADMIN"]),
            other_databases,
            st.sampled_from(USERS[:2]),
        ),
        st.builds(ast.GrantSelect, st.sampled_from(TABLES), st.sampled_from(USERS[:2])),
        st.builds(ast.RevokeSelect, st.sampled_from(TABLES), st.sampled_from(USERS[:2])),
    )


def printed() -> st.SearchStrategy[str]:
    def text(node: ast.Statement) -> str:
        try:
            return to_sql(node)
        except ValueError:  # a node the parser cannot make (a NaN literal): send its repr
            return repr(node)

    return statements().map(text)


# ---------------------------------------------------------------------------------------
# Near-valid mutations of printed text
# ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\w+|\S")


@st.composite
def mutated(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> str:
    text = draw(texts)
    tokens = _TOKEN.findall(text)
    if len(tokens) < 2:
        return text
    at = draw(st.integers(0, len(tokens) - 2))
    how = draw(st.sampled_from(["drop", "double", "swap", "truncate", "cut"]))
    if how == "drop":
        del tokens[at]
    elif how == "double":
        tokens.insert(at, tokens[at])
    elif how == "swap":
        tokens[at], tokens[at + 1] = tokens[at + 1], tokens[at]
    elif how == "truncate":
        del tokens[at + 1 :]
    else:  # cut inside the text, not at a token boundary: an open string or name
        return text[: draw(st.integers(1, len(text) - 1))]
    return " ".join(tokens)


# ---------------------------------------------------------------------------------------
# Hostile texts
# ---------------------------------------------------------------------------------------

DEPTHS = [50, 1_000]  # under and over the nesting a statement may have (200)
SIZES = [1_000, 100_000]


def _nested(kind: str, depth: int) -> str:
    if kind == "not":
        return "SELECT " + "NOT " * depth + "true"
    if kind == "plus":
        return "SELECT " + "+" * depth + "1"
    if kind == "minus":
        return "SELECT " + "- " * depth + "1"
    if kind == "and":
        return "SELECT * FROM t WHERE " + " AND ".join(["ok"] * depth)
    if kind == "sum":
        return "SELECT id" + " + 1" * depth + " FROM t"
    if kind == "calls":
        return "SELECT " + "abs(" * depth + "id" + ")" * depth + " FROM t"
    if kind == "parens":
        return "SELECT " + "(" * depth + "1" + ")" * depth
    if kind == "open":
        return "SELECT " + "(" * depth
    if kind == "case":
        return "SELECT " + "CASE WHEN true THEN " * depth + "1" + " END" * depth
    if kind == "cast":
        return "SELECT " + "CAST(" * depth + "1" + " AS INT)" * depth
    return "SELECT * FROM t WHERE " + " OR ".join(f"id = {i}" for i in range(depth))


def _huge(kind: str, size: int) -> str:
    if kind == "int":
        return "SELECT " + "9" * size
    if kind == "negative_int":
        return "INSERT INTO t (id) VALUES (-" + "9" * size + ")"
    if kind == "float":
        return "SELECT 1" + "0" * size + ".5"
    if kind == "fraction":
        return "SELECT 0." + "0" * size + "1"
    if kind == "exponent":
        return "SELECT 1e" + "9" * min(size, 5_000)
    if kind == "string":
        return "SELECT length('" + "x" * size + "')"
    if kind == "name":
        return "SELECT " + "a" * size + " FROM t"
    if kind == "quoted_name":
        return 'CREATE TABLE "' + "q" * size + '" (id INT)'
    if kind == "in":
        return "SELECT * FROM t WHERE id IN (" + ", ".join(map(str, range(size // 8))) + ")"
    if kind == "values":
        # The last row is bad: nothing of the thousands before it may stay.
        rows = ", ".join(f"({i})" for i in range(size // 50))
        return f"INSERT INTO t (id) VALUES {rows}, ('not a number')"
    if kind == "over_limit":
        return "SELECT " + "1 + " * 300_000 + "1"  # 1.2 MB: past max_sql_bytes
    return "SELECT 1" + " " * size + "-- " + "c" * size


_TYPED_EDGES = (
    [f"INSERT INTO t (id) VALUES ({v})" for v in INT_EDGES]
    + [f"INSERT INTO t (b) VALUES ({v})" for v in INT_EDGES]
    + [f"INSERT INTO t (ts) VALUES ('{v}')" for v in TIME_EDGES]
    + [f"INSERT INTO k VALUES (9, '{v}', 1)" for v in TIME_EDGES]
    + [f"INSERT INTO t (ts) VALUES ({v})" for v in INT_EDGES]
    + [
        f"SELECT CAST({v} AS TIMESTAMP)"
        for v in [2**63 - 1, -(2**63), 253402300800000000, -62135596800000001]
    ]
    + [f"SELECT CAST('{v}' AS TIMESTAMP)" for v in TIME_EDGES]
    + [
        f"SELECT date_trunc('{u}', CAST('{v}' AS TIMESTAMP))"
        for u in ["year", "week", "month"]
        for v in ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"]
    ]
    + [f"SELECT CAST('{v}' AS TIMESTAMP) + {d}" for v in TIME_EDGES[:5] for d in [1, -1, 2**62]]
    + [
        f"SELECT {a} {op} {b}"
        for a in ["9223372036854775807", "-9223372036854775808", "2147483647"]
        for op in ["+", "*", "-", "/", "%"]
        for b in ["1", "-1", "0", "2"]
    ]
    + [f"SELECT abs({v})" for v in ["-9223372036854775808", "-2147483648"]]
    + [
        f"SELECT round({v}, {d})"
        for v in ["1e308", "CAST('NaN' AS DOUBLE)", "1"]
        for d in ["-400", "400", "99999999999999999999", "-1"]
    ]
    + [
        f"SELECT CAST(CAST('{v}' AS DOUBLE) AS {t})"
        for v in ["NaN", "inf", "1e300"]
        for t in ["INT", "BIGINT", "TIMESTAMP", "STRING", "BOOLEAN"]
    ]
    + [
        "INSERT INTO t (v) VALUES (CAST('NaN' AS DOUBLE))",
        "INSERT INTO k VALUES (NULL, NULL, 1)",
        "INSERT INTO t (s, sym) VALUES ('\x00', '\x00')",
        "SELECT '\x00'",
        'SELECT 1 AS "\x00"',
        "SELECT 1\x00",
        "\x00",
        "",
        ";",
        ";;;",
        "--",
        "/*",
        "SELECT * FROM t LIMIT -1",
        "SELECT * FROM t LIMIT 99999999999999999999",
        "SELECT * FROM t LIMIT 1 OFFSET -5",
        "SELECT * FROM t ORDER BY 99",
        "SELECT * FROM t GROUP BY 0",
        "SELECT * FROM changes('t', -1)",
        "SELECT * FROM changes('t', 99999999999999999999)",
        "SELECT * FROM changes('t', 0, -1)",
        "SELECT * FROM changes('t', 0, 0)",
        "SELECT s LIKE '" + "%_" * 2000 + "' FROM t",
        "SELECT 'a' LIKE '\\'",
        "SELECT " + ", ".join(["id"] * 2000) + " FROM t",
        "SELECT count(*) FROM t GROUP BY " + ", ".join(["s"] * 2000),
        "ALTER TABLE k DROP PARTITION LIST '" + "9" * 5000 + "'",
    ]
)


_NESTING = ["not", "plus", "minus", "and", "sum", "calls", "parens", "open", "case", "cast", "or"]
_HUGE = [
    "int",
    "negative_int",
    "float",
    "fraction",
    "exponent",
    "string",
    "name",
    "quoted_name",
    "in",
    "values",
    "over_limit",
    "blank",
]
# Every hostile text, each sent once by the short run; the fuzz mixes them into its scripts.
HOSTILE = (
    [_nested(kind, depth) for kind in _NESTING for depth in DEPTHS]
    + [_huge(kind, size) for kind in _HUGE for size in SIZES if kind != "over_limit"]
    + [_huge("over_limit", 0)]
    + _TYPED_EDGES
)


def hostile() -> st.SearchStrategy[str]:
    return st.sampled_from(HOSTILE)


def sql_texts() -> st.SearchStrategy[str]:
    """Everything this module sends, as one strategy: statements, mutations, hostile texts,
    and scripts of them (several in a row, or data changes inside a transaction)."""
    valid = printed()
    one = st.one_of(valid, valid, mutated(valid), hostile())
    dml_nodes = st.one_of(
        inserts(),
        selects(),
        st.builds(
            ast.Update,
            st.just("t"),
            st.tuples(st.tuples(st.sampled_from(COLUMNS), expressions)),
            _optional,
        ),
        st.builds(ast.Delete, st.just("t"), expressions),
    )
    dml = dml_nodes.map(to_sql)
    dml = st.one_of(dml, mutated(dml))
    return st.one_of(
        one,
        one,
        one,
        st.lists(one, min_size=2, max_size=3).map("; ".join),
        st.lists(dml, min_size=1, max_size=2).map(
            lambda texts: "; ".join(["BEGIN", "INSERT INTO t (id) VALUES (99)", *texts, "COMMIT"])
        ),
    )
