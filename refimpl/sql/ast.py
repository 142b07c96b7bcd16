"""Typed statement and expression objects: what the parser makes and the executor runs.

All nodes are frozen dataclasses: hashable, comparable (so `parse(print(x)) == x` can be
tested) and safe to share between threads through the statement cache. Identifiers are kept
as written (case preserved); the catalog compares them case-insensitively.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Column types, in the spelling SHOW COLUMNS and the JSON answers use.
TYPES = ("INT", "BIGINT", "DOUBLE", "STRING", "SYMBOL", "BOOLEAN", "TIMESTAMP")

# ---------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------


class Expr:
    """Base of every expression node."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A constant. `type` is INT, DOUBLE, STRING, BOOLEAN or NULL (value None)."""

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
class Cast(Expr):
    operand: Expr
    type: str


@dataclass(frozen=True, slots=True)
class FuncCall(Expr):
    """A function or aggregate call. `name` is lower case. `count(*)` has star=True."""

    name: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False


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


Source = TableSource | FunctionSource


class Statement:
    """Base of every statement node."""

    __slots__ = ()


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
            self.items, self.source, self.where, self.group_by, self.having,
            self.order_by, self.limit, self.offset, self.distinct,
        )
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class Subscribe(Statement):
    """`SUBSCRIBE SELECT ...`: only /api/subscribe runs it."""

    select: Select


# ---------------------------------------------------------------------------------------
# Data changes
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Insert(Statement):
    """`INSERT INTO t [(cols)] VALUES ...` (rows) or `INSERT INTO t [(cols)] SELECT ...`."""

    table: str
    columns: tuple[str, ...] | None = None
    rows: tuple[tuple[Expr, ...], ...] | None = None
    select: Select | None = None


@dataclass(frozen=True, slots=True)
class Update(Statement):
    table: str
    assignments: tuple[tuple[str, Expr], ...]
    where: Expr | None = None


@dataclass(frozen=True, slots=True)
class Delete(Statement):
    table: str
    where: Expr | None = None


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
    pass


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


# ---------------------------------------------------------------------------------------
# Users, tokens and rights
# ---------------------------------------------------------------------------------------

PUBLIC = "PUBLIC"  # the grantee every request has, authenticated or not


@dataclass(frozen=True, slots=True)
class CreateUser(Statement):
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropUser(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateToken(Statement):
    """`CREATE TOKEN FOR u [EXPIRES IN '30d']`."""

    user: str
    expires_in: str | None = None


@dataclass(frozen=True, slots=True)
class DropToken(Statement):
    """`DROP TOKEN '<token or its id>'` drops one; `DROP TOKEN FOR u` drops all of u's."""

    token: str | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class GrantRole(Statement):
    """`GRANT READ|WRITE|ADMIN ON DATABASE d TO u` (u may be PUBLIC)."""

    role: str  # READ, WRITE or ADMIN
    database: str
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokeRole(Statement):
    role: str
    database: str
    grantee: str


@dataclass(frozen=True, slots=True)
class GrantSelect(Statement):
    """`GRANT SELECT ON t TO u`: in the current database."""

    table: str
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokeSelect(Statement):
    table: str
    grantee: str


@dataclass(frozen=True, slots=True)
class ShowUsers(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ShowGrants(Statement):
    user: str


@dataclass(frozen=True, slots=True)
class ParsedScript:
    """What `parse` returns: the statements of a text, and the number of `?` it holds."""

    statements: tuple[Statement, ...]
    param_count: int = 0
    sources: tuple[str, ...] = field(default=())  # each statement's own text, trimmed
