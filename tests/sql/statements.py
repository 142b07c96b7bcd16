"""The statements of the parser's tests, each with the ast node it parses to: the parser's
table of cases (tests/sql/test_parser.py) and the printer's texts to print back
(tests/sql/test_printer.py)."""

from __future__ import annotations

from refimpl.sql import ast
from refimpl.sql.ast import (
    AddColumn,
    AlterDatabaseSet,
    Begin,
    Binary,
    Checkpoint,
    ColumnDef,
    ColumnRef,
    Commit,
    CreateDatabase,
    CreateTable,
    CreateToken,
    CreateUser,
    Delete,
    DropColumn,
    DropDatabase,
    DropPartitionList,
    DropPartitionWhere,
    DropTable,
    DropToken,
    DropUser,
    FuncCall,
    FunctionSource,
    GrantRole,
    GrantSelect,
    Insert,
    IsNull,
    Literal,
    OrderItem,
    Param,
    RevokeRole,
    RevokeSelect,
    Rollback,
    Select,
    SelectItem,
    ShowColumns,
    ShowCreateTable,
    ShowGrants,
    ShowTables,
    ShowUsers,
    Star,
    Subscribe,
    TableSource,
    Truncate,
    Update,
)


def col(name: str, table: str | None = None) -> ColumnRef:
    return ColumnRef(name, table)


def lit(value: object) -> Literal:
    kinds = {bool: "BOOLEAN", int: "INT", float: "DOUBLE", str: "STRING", type(None): "NULL"}
    return Literal(value, kinds[type(value)])


STATEMENTS: list[tuple[str, ast.Statement]] = [
    (
        "CREATE TABLE candles (time TIMESTAMP, symbol SYMBOL, close DOUBLE) TIMESERIES(time) "
        "PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time);",
        CreateTable(
            "candles",
            (
                ColumnDef("time", "TIMESTAMP"),
                ColumnDef("symbol", "SYMBOL"),
                ColumnDef("close", "DOUBLE"),
            ),
            timeseries="time",
            partition_by="YEAR",
            partition_symbol="symbol",
            sort_by=("symbol", "time"),
            dedup_key=("symbol", "time"),
        ),
    ),
    (
        "create table if not exists acct (id int primary key, name string, bal double)",
        CreateTable(
            "acct",
            (ColumnDef("id", "INT"), ColumnDef("name", "STRING"), ColumnDef("bal", "DOUBLE")),
            True,
            ("id",),
        ),
    ),
    (
        "CREATE TABLE pos (acct BIGINT, sym SYMBOL, qty INT, ok BOOLEAN, PRIMARY KEY (acct, sym))"
        " PARTITION BY NONE",
        CreateTable(
            "pos",
            (
                ColumnDef("acct", "BIGINT"),
                ColumnDef("sym", "SYMBOL"),
                ColumnDef("qty", "INT"),
                ColumnDef("ok", "BOOLEAN"),
            ),
            primary_key=("acct", "sym"),
            partition_by="NONE",
        ),
    ),
    ("DROP TABLE t", DropTable("t")),
    ("DROP TABLE IF EXISTS t", DropTable("t", True)),
    ("TRUNCATE t", Truncate("t")),
    ("TRUNCATE TABLE t", Truncate("t")),
    ("ALTER TABLE t ADD COLUMN c TIMESTAMP", AddColumn("t", ColumnDef("c", "TIMESTAMP"))),
    ("ALTER TABLE t DROP COLUMN c", DropColumn("t", "c")),
    (
        "ALTER TABLE t DROP PARTITION LIST '2026', '2027-01'",
        DropPartitionList("t", ("2026", "2027-01")),
    ),
    (
        "ALTER TABLE t DROP PARTITION WHERE time < '2026-01-01'",
        DropPartitionWhere("t", Binary("<", col("time"), lit("2026-01-01"))),
    ),
    ("CREATE DATABASE d", CreateDatabase("d")),
    ("CREATE DATABASE IF NOT EXISTS d", CreateDatabase("d", True)),
    ("DROP DATABASE d", DropDatabase("d")),
    ("DROP DATABASE IF EXISTS d", DropDatabase("d", True)),
    ("ALTER DATABASE d SET WAL_ARCHIVE = '2GB'", AlterDatabaseSet("d", "wal_archive", "2GB")),
    ("INSERT INTO t VALUES (1, 'abc', 2.5)", Insert("t", rows=((lit(1), lit("abc"), lit(2.5)),))),
    (
        "INSERT INTO t (a, b) VALUES (1, NULL), (-2, TRUE), (?, 1 + ?)",
        Insert(
            "t",
            ("a", "b"),
            rows=(
                (lit(1), lit(None)),
                (lit(-2), lit(True)),
                (Param(0), Binary("+", lit(1), Param(1))),
            ),
        ),
    ),
    (
        "INSERT INTO t (a) SELECT b FROM u WHERE c",
        Insert("t", ("a",), select=Select((SelectItem(col("b")),), TableSource("u"), col("c"))),
    ),
    (
        "UPDATE t SET a = a + 1, b = 'x' WHERE id = ?",
        Update(
            "t",
            (("a", Binary("+", col("a"), lit(1))), ("b", lit("x"))),
            Binary("=", col("id"), Param(0)),
        ),
    ),
    ("UPDATE t SET a = 1", Update("t", (("a", lit(1)),))),
    ("DELETE FROM t", Delete("t")),
    ("DELETE FROM t WHERE a IS NULL", Delete("t", IsNull(col("a")))),
    ("SELECT 1", Select((SelectItem(lit(1)),))),
    ("SELECT * FROM t", Select((SelectItem(Star()),), TableSource("t"))),
    (
        "SELECT t.*, t.a FROM t",
        Select((SelectItem(Star("t")), SelectItem(col("a", "t"))), TableSource("t")),
    ),
    (
        "SELECT DISTINCT a AS x, b y FROM t AS u",
        Select(
            (SelectItem(col("a"), "x"), SelectItem(col("b"), "y")),
            TableSource("t", "u"),
            distinct=True,
        ),
    ),
    (
        "SELECT * FROM changes('t', 5, 100) c",
        Select((SelectItem(Star()),), FunctionSource("changes", (lit("t"), lit(5), lit(100)), "c")),
    ),
    (
        "SELECT * FROM CHANGES('t')",
        Select((SelectItem(Star()),), FunctionSource("changes", (lit("t"),))),
    ),
    (
        "SELECT sym, count(*) FROM t WHERE a > 1 GROUP BY sym HAVING count(*) > 2 "
        "ORDER BY sym DESC NULLS FIRST, 2 ASC, b NULLS LAST LIMIT 10 OFFSET 20",
        Select(
            (SelectItem(col("sym")), SelectItem(FuncCall("count", (), star=True))),
            TableSource("t"),
            Binary(">", col("a"), lit(1)),
            (col("sym"),),
            Binary(">", FuncCall("count", (), star=True), lit(2)),
            (
                OrderItem(col("sym"), True, True),
                OrderItem(lit(2)),
                OrderItem(col("b"), False, False),
            ),
            lit(10),
            lit(20),
        ),
    ),
    ("SELECT a FROM t LIMIT ?", Select((SelectItem(col("a")),), TableSource("t"), limit=Param(0))),
    (
        "SUBSCRIBE SELECT a FROM t WHERE b = 1",
        Subscribe(Select((SelectItem(col("a")),), TableSource("t"), Binary("=", col("b"), lit(1)))),
    ),
    ("BEGIN", Begin()),
    ("BEGIN TRANSACTION", Begin()),
    ("COMMIT", Commit()),
    ("ROLLBACK", Rollback()),
    ("CHECKPOINT", Checkpoint()),
    ("SHOW TABLES", ShowTables()),
    ("SHOW COLUMNS FROM t", ShowColumns("t")),
    ("SHOW CREATE TABLE t", ShowCreateTable("t")),
    ("CREATE USER u", CreateUser("u")),
    ("CREATE USER IF NOT EXISTS u", CreateUser("u", True)),
    ("DROP USER u", DropUser("u")),
    ("DROP USER IF EXISTS u", DropUser("u", True)),
    ("CREATE TOKEN FOR u", CreateToken("u")),
    ("CREATE TOKEN FOR u EXPIRES IN '30d'", CreateToken("u", "30d")),
    ("DROP TOKEN 'tok'", DropToken(token="tok")),
    ("DROP TOKEN FOR u", DropToken(user="u")),
    ("GRANT READ ON DATABASE d TO u", GrantRole("READ", "d", "u")),
    ("grant write on database d to public", GrantRole("WRITE", "d", "PUBLIC")),
    ("REVOKE ADMIN ON DATABASE d FROM u", RevokeRole("ADMIN", "d", "u")),
    ("REVOKE READ ON DATABASE d FROM PUBLIC", RevokeRole("READ", "d", "PUBLIC")),
    ("GRANT SELECT ON t TO u", GrantSelect("t", "u")),
    ("GRANT SELECT ON TABLE t TO PUBLIC", GrantSelect("t", "PUBLIC")),
    ("REVOKE SELECT ON t FROM u", RevokeSelect("t", "u")),
    ("REVOKE SELECT ON TABLE t FROM public", RevokeSelect("t", "PUBLIC")),
    ("SHOW USERS", ShowUsers()),
    ("SHOW GRANTS FOR u", ShowGrants("u")),
]
