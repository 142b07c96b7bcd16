"""Typed statement and expression objects: what the parser makes and the executor runs.

All nodes are frozen dataclasses: hashable, comparable (so `parse(print(x)) == x` can be
tested) and safe to share between threads through the statement cache. Identifiers are kept
as written (case preserved); the catalog compares them case-insensitively.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.sql import ast_types
from refimpl.sql.ast_access import (  # noqa: F401 - re-exported: ast.CreateUser, ...
    PUBLIC,
    CreateToken,
    CreateUser,
    DropToken,
    DropUser,
    GrantRole,
    GrantSelect,
    RevokeRole,
    RevokeSelect,
    ShowDatabases,
    ShowGrants,
    ShowUsers,
    Statement,
)
from refimpl.sql.ast_arrays import (  # noqa: F401 - re-exported: ast.Subscript, ...
    ArrayValue,
    Cast,
    Subscript,
)
from refimpl.sql.ast_base import Expr, outermost, walk  # noqa: F401 - re-exported: ast.walk
from refimpl.sql.ast_calls import FieldSelect, WindowCall  # noqa: F401 - re-exported
from refimpl.sql.ast_copy import (  # noqa: F401 - re-exported: ast.CopyFrom, ...
    CopyFrom,
    CopyOption,
    CopyTo,
    CopyValue,
)
from refimpl.sql.ast_routines import (  # noqa: F401 - re-exported: ast.CreateTrigger, ...
    Call,
    CreateProcedure,
    CreateTrigger,
    DropProcedure,
    DropTrigger,
    ProcedureParam,
    ShowProcedures,
    ShowTriggers,
)
from refimpl.sql.ast_session import Fetch, RollbackTo, TransactionModes  # noqa: F401

# Column types, in the spelling SHOW COLUMNS and the JSON answers use.
TYPES = ("INT", "BIGINT", "DOUBLE", "STRING", "SYMBOL", "BOOLEAN", "TIMESTAMP")

# Other databases' type names, taken as aliases of these (spec/types-and-values.md, "Type
# names"); the first word of the name decides (`DOUBLE PRECISION`, `SIGNED INTEGER`).
TYPE_ALIASES = {
    "INTEGER": "BIGINT",
    "SMALLINT": "INT",
    "SIGNED": "BIGINT",
    "REAL": "DOUBLE",
    "FLOAT": "DOUBLE",
    "NUMERIC": "DOUBLE",
    "DECIMAL": "DOUBLE",
    "TEXT": "STRING",
    "VARCHAR": "STRING",
    "CHAR": "STRING",
    "BOOL": "BOOLEAN",
    "TIMESTAMPTZ": "TIMESTAMP",
    **ast_types.PG_TYPE_ALIASES,
}

# ---------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A constant. `type` is INT, DOUBLE, STRING, BOOLEAN, BLOB (bytes) or NULL (value None)."""

    value: object
    type: str


@dataclass(frozen=True, slots=True)
class Param(Expr):
    """A `?` placeholder; `index` counts from 0 in text order over the whole statement."""

    index: int


@dataclass(frozen=True, slots=True)
class ColumnRef(Expr):
    name: str
    table: str | None = None


@dataclass(frozen=True, slots=True)
class Star(Expr):
    """`*` or `t.*` in a select list."""

    table: str | None = None


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: str  # '-', '+', 'NOT'
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    # '+', '-', '*', '/', '%', '||', '=', '<>', '<', '<=', '>', '>=', 'AND', 'OR'.
    # `!=` parses to '<>'.
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Expr):
    operand: Expr
    pattern: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Case(Expr):
    """`CASE [operand] WHEN .. THEN .. [ELSE ..] END`."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None


@dataclass(frozen=True, slots=True)
class FuncCall(Expr):
    """A function or aggregate call. `name` is lower case. `count(*)` has star=True."""

    name: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False
    order_by: tuple[OrderItem, ...] = ()  # an aggregate's own: array_agg(x ORDER BY y)


# ---------------------------------------------------------------------------------------
# SELECT
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SelectItem:
    expr: Expr
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: Expr
    descending: bool = False
    nulls_first: bool | None = None  # None: the default (NULLS LAST ascending, FIRST desc)


@dataclass(frozen=True, slots=True)
class TableSource:
    name: str
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionSource:
    """A table function in FROM, such as `changes('t', 10, 100)`."""

    name: str  # lower case
    args: tuple[Expr, ...]
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class JoinSource:
    """`left [NATURAL] [INNER|LEFT|RIGHT|FULL|CROSS] JOIN right [ON ... | USING (...)]`; a
    comma is CROSS. Joins nest to the left as written, or as parentheses group them.
    `natural`: USING the columns both sides name (known only once the sides are)."""

    kind: str
    left: Source
    right: Source
    on: Expr | None = None
    using: tuple[str, ...] = ()
    natural: bool = False
    comma: bool = False  # written `left, right` (a CROSS join binding looser than JOIN)


@dataclass(frozen=True, slots=True)
class SubquerySource:
    """A query in FROM: `(SELECT ...) AS s`, `(VALUES ...) AS v(a, b)`."""

    query: Query
    alias: str | None = None
    columns: tuple[str, ...] = ()


Source = TableSource | FunctionSource | JoinSource | SubquerySource


@dataclass(frozen=True, slots=True)
class Select(Statement):
    items: tuple[SelectItem, ...]
    source: Source | None = None
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: Expr | None = None
    offset: Expr | None = None
    distinct: bool = False
    # Hashed once: a SELECT is a cache key (result cache, plan checks) on every run, and
    # hashing the whole tree each time would cost more than many a point query.
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (
            self.items,
            self.source,
            self.where,
            self.group_by,
            self.having,
            self.order_by,
            self.limit,
            self.offset,
            self.distinct,
        )
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class Values(Statement):
    """`VALUES (1, 'a'), (2, 'b')` as a query: columns column1, column2, ..."""

    rows: tuple[tuple[Expr, ...], ...]


@dataclass(frozen=True, slots=True)
class SetOperation(Statement):
    """`left UNION [ALL] | INTERSECT [ALL] | EXCEPT [ALL] right`, ORDER BY and LIMIT over the whole.

    Operators bind alike, left to right (as in SQLite): `a UNION b EXCEPT c` is `(a UNION b)
    EXCEPT c`. `op` is UNION, INTERSECT or EXCEPT.
    """

    op: str
    left: Query
    right: Query
    all: bool = False
    order_by: tuple[OrderItem, ...] = ()
    limit: Expr | None = None
    offset: Expr | None = None


@dataclass(frozen=True, slots=True)
class CommonTable:
    """One `name [(columns)] AS (query)` of a WITH clause."""

    name: str
    query: Query
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WithQuery(Statement):
    """`WITH [RECURSIVE] a AS (...), b AS (...) body`: each table may read the ones before it."""

    tables: tuple[CommonTable, ...]
    body: Query
    recursive: bool = False


Query = Select | Values | SetOperation | WithQuery


@dataclass(frozen=True, slots=True)
class ScalarSubquery(Expr):
    """`(SELECT x ...)` as a value: NULL without rows, an error with more than one."""

    query: Query


@dataclass(frozen=True, slots=True)
class Exists(Expr):
    query: Query


@dataclass(frozen=True, slots=True)
class ArrayQuantified(Expr):
    """`operand op ANY (array)` / `ALL (array)`, the array being its text (`{1,2}`)."""

    op: str
    operand: Expr
    quantifier: str  # ANY or ALL
    array: Expr


@dataclass(frozen=True, slots=True)
class ArraySubquery(Expr):
    """`ARRAY(SELECT x ...)`: the one-column rows as PostgreSQL's text of an array, `{a,b}`
    (this engine has no array type; psql's catalog queries ask for one)."""

    query: Query


@dataclass(frozen=True, slots=True)
class InSubquery(Expr):
    operand: Expr
    query: Query
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Quantified(Expr):
    """`operand op ANY (query)` or `operand op ALL (query)`; SOME is ANY."""

    op: str
    operand: Expr
    quantifier: str  # ANY or ALL
    query: Query


@dataclass(frozen=True, slots=True)
class Subscribe(Statement):
    """`SUBSCRIBE SELECT ...`: only /api/subscribe runs it.

    The grammar takes any query after SUBSCRIBE, so that /api/subscribe can say which part of
    it a live query cannot have.
    """

    select: Query


# ---------------------------------------------------------------------------------------
# Data changes
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Insert(Statement):
    """`INSERT INTO t [(cols)] VALUES ...` (rows) or `INSERT INTO t [(cols)] SELECT ...`."""

    table: str
    columns: tuple[str, ...] | None = None
    rows: tuple[tuple[Expr, ...], ...] | None = None
    select: Query | None = None
    returning: tuple[SelectItem, ...] = ()  # RETURNING's items: the written rows answered


@dataclass(frozen=True, slots=True)
class Update(Statement):
    table: str
    assignments: tuple[tuple[str, Expr], ...]
    where: Expr | None = None
    returning: tuple[SelectItem, ...] = ()


@dataclass(frozen=True, slots=True)
class Delete(Statement):
    table: str
    where: Expr | None = None
    returning: tuple[SelectItem, ...] = ()


# ---------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnDef:
    name: str
    type: str  # one of TYPES


@dataclass(frozen=True, slots=True)
class CreateTable(Statement):
    """CREATE TABLE. A column-level PRIMARY KEY is folded into `primary_key`.

    `partition_by` is None when the clause is absent, else NONE, YEAR, MONTH or DAY.
    """

    name: str
    columns: tuple[ColumnDef, ...]
    if_not_exists: bool = False
    primary_key: tuple[str, ...] = ()
    timeseries: str | None = None
    partition_by: str | None = None
    partition_symbol: str | None = None
    sort_by: tuple[str, ...] = ()
    dedup_key: tuple[str, ...] = ()
    # UNIQUE constraints (a column's UNIQUE folded in) and the table's secondary indexes:
    # CREATE INDEX adds to `indexes`, and the canonical text keeps them as table elements.
    unique: tuple[tuple[str, ...], ...] = ()
    indexes: tuple[IndexDef, ...] = ()
    # REPLICA IDENTITY FULL: the log keeps the row before each update and delete.
    replica_identity_full: bool = False


@dataclass(frozen=True, slots=True)
class IndexDef:
    """A secondary index of a table: its name (unique in the database) and columns."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False


@dataclass(frozen=True, slots=True)
class CreateIndex(Statement):
    """`CREATE [UNIQUE] INDEX [IF NOT EXISTS] i ON t (a, b)`."""

    table: str
    index: IndexDef
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropIndex(Statement):
    """`DROP INDEX [IF EXISTS] i`; `table` is set in the logged form (the log names it)."""

    name: str
    if_exists: bool = False
    table: str | None = None


@dataclass(frozen=True, slots=True)
class Explain(Statement):
    """`EXPLAIN <query>`: the plan, one line a step, instead of the rows."""

    query: Statement


@dataclass(frozen=True, slots=True)
class CreateView(Statement):
    """`CREATE VIEW [IF NOT EXISTS] v AS <query>`."""

    name: str
    query: Query
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropView(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropTable(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Truncate(Statement):
    name: str


@dataclass(frozen=True, slots=True)
class AddColumn(Statement):
    table: str
    column: ColumnDef


@dataclass(frozen=True, slots=True)
class DropColumn(Statement):
    table: str
    column: str


@dataclass(frozen=True, slots=True)
class AlterReplicaIdentity(Statement):
    """`ALTER TABLE t REPLICA IDENTITY FULL | DEFAULT` (before-images on or off)."""

    table: str
    full: bool


@dataclass(frozen=True, slots=True)
class DropPartitionList(Statement):
    """`ALTER TABLE t DROP PARTITION LIST '2026', '2027-01'`."""

    table: str
    partitions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropPartitionWhere(Statement):
    table: str
    where: Expr


@dataclass(frozen=True, slots=True)
class CreateDatabase(Statement):
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropDatabase(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterDatabaseSet(Statement):
    """`ALTER DATABASE d SET WAL_ARCHIVE = '2GB'`; `setting` is lower case, value as written."""

    name: str
    setting: str
    value: str


# ---------------------------------------------------------------------------------------
# Transactions and maintenance
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Begin(Statement):
    """`BEGIN [TRANSACTION | WORK] [modes]` or `START TRANSACTION [modes]`."""

    modes: TransactionModes = TransactionModes()


@dataclass(frozen=True, slots=True)
class Commit(Statement):
    pass


@dataclass(frozen=True, slots=True)
class Rollback(Statement):
    pass


@dataclass(frozen=True, slots=True)
class Checkpoint(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ShowTables(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ShowColumns(Statement):
    table: str


@dataclass(frozen=True, slots=True)
class ShowCreateTable(Statement):
    table: str


@dataclass(frozen=True, slots=True)
class ParsedScript:
    """What `parse` returns: the statements of a text, and the number of `?` it holds."""

    statements: tuple[Statement, ...]
    param_count: int = 0
    sources: tuple[str, ...] = field(default=())  # each statement's own text, trimmed
