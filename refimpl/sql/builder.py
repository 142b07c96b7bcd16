"""Parse-tree reductions -> statement and expression objects (`refimpl.sql.ast`).

`Builder` runs inside the LALR parser as it reduces (one pass, no intermediate tree); it
checks what the grammar cannot (one PRIMARY KEY, names not empty) and raises
SqlSyntaxError at the offending token.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from lark import Token, v_args

from refimpl.errors import NotAllowed, StatementTimeout, StatementTooLarge
from refimpl.sql import ast, ast_types
from refimpl.sql.ast import Expr
from refimpl.sql.ast_access import AlterUser
from refimpl.sql.builder_copy import CopyBuilder
from refimpl.sql.builder_ddl import DdlBuilder, error_at
from refimpl.sql.builder_pg import PgBuilder, cast_to
from refimpl.sql.builder_publications import PublicationBuilder
from refimpl.sql.builder_queries import QueryBuilder
from refimpl.sql.builder_routines import RoutineBuilder
from refimpl.sql.builder_session import SessionBuilder
from refimpl.sql.builder_values import ValueFunctionBuilder, refuse_keyword_call

# `?` numbering needs one counter per parse, and the statement timeout a deadline and a count
# of tokens read. The transformer is shared by every thread (it is built into the parser), so
# they live in thread-local storage, reset by `parse`.
parameters = threading.local()

# Limits of one statement (spec/sql.md, "Limits"): a list longer than these is refused with
# StatementTooLarge before anything runs.
MAX_IN_ITEMS = 10_000
MAX_VALUES_ROWS = 100_000
# The clock is read once every this many tokens, so that the check costs nothing measurable.
_TICKS_PER_CLOCK_READ = 1024


def start(deadline: float | None) -> None:
    """Reset the per-parse state of this thread: `?` numbering and the deadline."""
    parameters.count = 0
    parameters.deadline = deadline
    parameters.ticks = 0


def _tick() -> None:
    """Called for every name and constant: stops a parse that runs past its deadline."""
    ticks = parameters.ticks + 1
    parameters.ticks = ticks
    if ticks % _TICKS_PER_CLOCK_READ == 0:
        deadline = parameters.deadline
        if deadline is not None and time.monotonic() > deadline:
            raise StatementTimeout.ran_too_long()


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _unquote(token: Token) -> str:
    return token[1:-1].replace("''", "'")


@v_args(inline=True)
class Builder(
    QueryBuilder,
    DdlBuilder,
    PgBuilder,
    CopyBuilder,
    RoutineBuilder,
    SessionBuilder,
    PublicationBuilder,
    ValueFunctionBuilder,
):
    """Builds ast nodes while the LALR parser reduces (one pass, no parse tree).

    Method names are the rule or alias names of the grammar. Optional parts arrive as None
    (lark's maybe_placeholders).
    """

    # --- script ---------------------------------------------------------------------------

    def script(self, *children: Any) -> list[tuple[ast.Statement, int, int | None]]:
        # Returns (statement, start, end) offsets so that `parse` can cut out each statement's
        # own text; `;` tokens are kept in the tree for exactly this.
        entries: list[tuple[ast.Statement, int, int | None]] = []
        statement = None
        start = 0
        for child in children:
            if isinstance(child, Token):
                if statement is not None:
                    entries.append((statement, start, child.start_pos))
                statement = None
                assert child.end_pos is not None  # LALR tokens carry their place
                start = child.end_pos
            else:
                statement = child
        if statement is not None:
            entries.append((statement, start, None))
        return entries

    # --- names ------------------------------------------------------------------------------

    def ident(self, token: Token) -> str:
        _tick()
        if token.type == "QUOTED_IDENT":
            if len(token) == 2:
                raise error_at(
                    token,
                    "a quoted name cannot be empty: write at least one "
                    "character between the double quotes",
                )
            return token[1:-1].replace('""', '"')
        return str(token)

    def table_name(self, name: str) -> str:
        return name

    column_name = database_name = user_name = setting_name = alias = table_name

    def function_name(self, name: str) -> str:
        return name.lower()

    def type_name(self, token: Token, *size: Any) -> str:
        name = token.upper()
        if name in ast_types.UNSUPPORTED_TYPES and name not in ast_types.FUNCTION_CASTS:
            raise NotAllowed(
                f"the type {name} is not supported; {ast_types.UNSUPPORTED_TYPES[name]}"
            )
        return ast.TYPE_ALIASES.get(name, name)

    def type_size(self, *numbers: Token | None) -> None:
        return None  # read, not kept: a length or precision changes no type here

    # --- SELECT -----------------------------------------------------------------------------

    def distinct(self) -> bool:
        return True

    def select_all(self) -> bool:
        return False

    def select_list(self, *items: ast.SelectItem) -> tuple[ast.SelectItem, ...]:
        return items

    def select_expr(self, expr: Expr, alias: str | None) -> ast.SelectItem:
        return ast.SelectItem(expr, alias)

    def select_star(self) -> ast.SelectItem:
        return ast.SelectItem(ast.Star())

    def select_table_star(self, table: str) -> ast.SelectItem:
        return ast.SelectItem(ast.Star(table))

    def from_clause(self, source: ast.Source) -> ast.Source:
        return source

    def table_source(self, name: str, alias: str | None) -> ast.TableSource:
        return ast.TableSource(name, alias)

    def function_source(
        self, name: str, args: tuple[Expr, ...] | None, alias: str | None
    ) -> ast.FunctionSource:
        return ast.FunctionSource(name, args or (), alias)

    def where(self, expr: Expr) -> Expr:
        return expr

    having = where

    def group_by(self, exprs: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return exprs

    def order_by(self, *items: ast.OrderItem) -> tuple[ast.OrderItem, ...]:
        return items

    def order_item(
        self, expr: Expr, descending: bool | None, nulls_first: bool | None
    ) -> ast.OrderItem:
        return ast.OrderItem(expr, bool(descending), nulls_first)

    def asc(self) -> bool:
        return False

    def desc(self) -> bool:
        return True

    nulls_first = desc
    nulls_last = asc

    def limit(self, limit: Expr, offset: Expr | None) -> tuple[Expr, Expr | None]:
        return limit, offset

    def expr_list(self, *exprs: Expr) -> tuple[Expr, ...]:
        return exprs

    # --- expressions ----------------------------------------------------------------------

    def or_(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("OR", left, right)

    def and_(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("AND", left, right)

    def not_(self, operand: Expr) -> ast.Unary:
        return ast.Unary("NOT", operand)

    def negation(self) -> bool:
        return True

    def comparison(self, token: Token) -> str:
        return "<>" if token == "!=" else str(token)

    def compare(self, left: Expr, op: str, right: Expr) -> ast.Binary:
        return ast.Binary(op, left, right)

    def not_null(self, operand: Expr) -> ast.IsNull:
        return ast.IsNull(operand, True)  # SQLite's `x NOT NULL` and `x NOTNULL`

    def isnull(self, operand: Expr) -> ast.IsNull:
        return ast.IsNull(operand)

    def is_null(self, operand: Expr, negated: bool | None) -> ast.IsNull:
        return ast.IsNull(operand, negated is not None)

    def in_table(self, operand: Expr, negated: bool | None, table: str) -> ast.InSubquery:
        # SQLite's `x IN t`: short for `x IN (SELECT * FROM t)`.
        query = ast.Select((ast.SelectItem(ast.Star()),), ast.TableSource(table))
        return ast.InSubquery(operand, query, negated is not None)

    def in_list(
        self, operand: Expr, negated: bool | None, items: tuple[Expr, ...] | None
    ) -> ast.InList:
        items = items or ()
        if len(items) > MAX_IN_ITEMS:
            raise StatementTooLarge(
                f"an IN list has {len(items)} items, more than the {MAX_IN_ITEMS} a statement"
                " may have; put the values in a table, or split the statement"
            )
        return ast.InList(operand, items, negated is not None)

    def between(self, operand: Expr, negated: bool | None, low: Expr, high: Expr) -> ast.Between:
        return ast.Between(operand, low, high, negated is not None)

    def like(self, operand: Expr, negated: bool | None, pattern: Expr) -> ast.Like:
        return ast.Like(operand, pattern, negated is not None)

    def add(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("+", left, right)

    def sub(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("-", left, right)

    def concat(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("||", left, right)

    def mul(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("*", left, right)

    def div(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("/", left, right)

    def mod(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("%", left, right)

    def shift_left(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("<<", left, right)

    def shift_right(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary(">>", left, right)

    def bit_and(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("&", left, right)

    def bit_or(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("|", left, right)

    def neg(self, operand: Expr) -> Expr:
        # A minus before a number is folded into the literal, so that `-5` in VALUES is a
        # constant for the executor; the printer relies on Unary('-', number) never existing.
        if (
            isinstance(operand, ast.Literal)
            and operand.type in ("INT", "DOUBLE")
            and isinstance(operand.value, int | float)
        ):
            return ast.Literal(-operand.value, operand.type)
        return ast.Unary("-", operand)

    def negative_number(self, token: Token) -> ast.Literal:
        literal = self.number(token)
        assert isinstance(literal.value, int | float)  # a NUMBER token's value
        return ast.Literal(-literal.value, literal.type)

    def pos(self, operand: Expr) -> ast.Unary:
        return ast.Unary("+", operand)

    def number(self, token: Token) -> ast.Literal:
        _tick()
        if "." in token or "e" in token or "E" in token:
            number = float(token)
            if math.isinf(number):
                raise error_at(
                    token,
                    "this number is too large for a DOUBLE (finite numbers up to about 1.8e308)",
                )
            return ast.Literal(number, "DOUBLE")
        try:
            return ast.Literal(int(token), "INT")
        except ValueError:  # Python refuses to convert more than 4300 digits
            raise error_at(token, "this number has too many digits") from None

    def string(self, token: Token) -> ast.Literal:
        _tick()
        return ast.Literal(_unquote(token), "STRING")

    def blob(self, token: Token) -> ast.Literal:
        _tick()
        digits = token[2:-1]
        if len(digits) % 2 or not _HEX_DIGITS.issuperset(digits):
            raise error_at(
                token,
                "a BLOB literal X'...' holds pairs of hexadecimal digits"
                " (0-9, a-f), such as X'00ff'",
            )
        return ast.Literal(bytes.fromhex(digits), "BLOB")

    def true(self) -> ast.Literal:
        return ast.Literal(True, "BOOLEAN")

    def false(self) -> ast.Literal:
        return ast.Literal(False, "BOOLEAN")

    def null(self) -> ast.Literal:
        return ast.Literal(None, "NULL")

    def param(self) -> ast.Param:
        _tick()
        index = parameters.count
        parameters.count = index + 1
        return ast.Param(index)

    def column(self, name: str) -> ast.ColumnRef:
        return ast.ColumnRef(name)

    def qualified_column(self, table: str, name: str) -> ast.ColumnRef:
        return ast.ColumnRef(name, table)

    def call(self, name: str, args: tuple[Expr, ...] | None) -> ast.FuncCall:
        name = name.lower()
        refuse_keyword_call(name)
        return ast.FuncCall(name, args or ())

    def call_star(self, name: str) -> ast.FuncCall:
        return ast.FuncCall(name.lower(), (), star=True)

    def call_distinct(self, name: str, args: tuple[Expr, ...]) -> ast.FuncCall:
        return ast.FuncCall(name.lower(), args, distinct=True)

    def case(self, operand: Expr | None, *rest: Any) -> ast.Case:
        return ast.Case(operand, rest[:-1], rest[-1])

    def when(self, condition: Expr, result: Expr) -> tuple[Expr, Expr]:
        return condition, result

    def cast(self, operand: Expr, type_: str) -> Expr:
        if type_ in ast_types.FUNCTION_CASTS:  # CAST(x AS REGCLASS) is x::regclass
            return ast.FuncCall(type_.lower(), (operand,))
        return cast_to(operand, type_)

    # --- data changes -----------------------------------------------------------------------

    def insert(
        self,
        table: str,
        columns: tuple[str, ...] | None,
        body: ast.Query,
        returning: tuple[ast.SelectItem, ...] | None,
    ) -> ast.Insert:
        if isinstance(body, ast.Values):
            return ast.Insert(table, columns, rows=body.rows, returning=returning or ())
        return ast.Insert(table, columns, select=body, returning=returning or ())

    def returning(self, items: tuple[ast.SelectItem, ...]) -> tuple[ast.SelectItem, ...]:
        return items

    def column_list(self, *names: str) -> tuple[str, ...]:
        return names

    column_names = column_list

    def values(self, *rows: tuple[Expr, ...]) -> ast.Values:
        if len(rows) > MAX_VALUES_ROWS:
            raise StatementTooLarge(
                f"a VALUES list has {len(rows)} VALUES rows, more than the {MAX_VALUES_ROWS}"
                " a statement may have; split it into several INSERTs, or use POST /imp"
            )
        return ast.Values(rows)

    def row(self, *exprs: Expr) -> tuple[Expr, ...]:
        return exprs

    def update(self, table: str, *rest: Any) -> ast.Update:
        return ast.Update(table, rest[:-2], rest[-2], rest[-1] or ())

    def assignment(self, column: str, expr: Expr) -> tuple[str, Expr]:
        return column, expr

    def delete(
        self, table: str, where: Expr | None, returning: tuple[ast.SelectItem, ...] | None
    ) -> ast.Delete:
        return ast.Delete(table, where, returning or ())

    # --- schema ---------------------------------------------------------------------------

    def timeseries(self, column: str) -> str:
        return column

    def partition_by(self, unit: str, symbol: str | None) -> tuple[str, str | None]:
        return unit, symbol

    def partition_unit(self, token: Token) -> str:
        return token.upper()

    role = partition_unit

    def sort_by(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        return columns

    dedup_key = sort_by

    def if_exists(self) -> bool:
        return True

    if_not_exists = if_exists

    def drop_table(self, if_exists: bool | None, name: str) -> ast.DropTable:
        return ast.DropTable(name, if_exists is not None)

    def truncate(self, name: str) -> ast.Truncate:
        return ast.Truncate(name)

    def add_column(self, table: str, column: str, type_: str) -> ast.AddColumn:
        return ast.AddColumn(table, ast.ColumnDef(column, type_))

    def drop_column(self, table: str, column: str) -> ast.DropColumn:
        return ast.DropColumn(table, column)

    def drop_partition_list(self, table: str, *names: Token) -> ast.DropPartitionList:
        return ast.DropPartitionList(table, tuple(_unquote(name) for name in names))

    def drop_partition_where(self, table: str, where: Expr) -> ast.DropPartitionWhere:
        return ast.DropPartitionWhere(table, where)

    def create_database(self, if_not_exists: bool | None, name: str) -> ast.CreateDatabase:
        return ast.CreateDatabase(name, if_not_exists is not None)

    def drop_database(self, if_exists: bool | None, name: str) -> ast.DropDatabase:
        return ast.DropDatabase(name, if_exists is not None)

    def alter_database(self, name: str, setting: str, value: str) -> ast.AlterDatabaseSet:
        return ast.AlterDatabaseSet(name, setting.lower(), value)

    def setting_string(self, token: Token) -> str:
        return _unquote(token)

    def setting_number(self, token: Token) -> str:
        return str(token)

    # --- transactions, maintenance, catalog -------------------------------------------------

    def commit(self) -> ast.Commit:
        return ast.Commit()

    def rollback(self) -> ast.Rollback:
        return ast.Rollback()

    def checkpoint(self) -> ast.Checkpoint:
        return ast.Checkpoint()

    def show_tables(self) -> ast.ShowTables:
        return ast.ShowTables()

    def show_columns(self, table: str) -> ast.ShowColumns:
        return ast.ShowColumns(table)

    def show_create_table(self, table: str) -> ast.ShowCreateTable:
        return ast.ShowCreateTable(table)

    def show_users(self) -> ast.ShowUsers:
        return ast.ShowUsers()

    def show_databases(self) -> ast.ShowDatabases:
        return ast.ShowDatabases()

    def show_grants(self, user: str) -> ast.ShowGrants:
        return ast.ShowGrants(user)

    # --- users, tokens, rights --------------------------------------------------------------

    def create_user(
        self, if_not_exists: bool | None, name: str, replication: bool | None
    ) -> ast.CreateUser:
        return ast.CreateUser(name, if_not_exists is not None, bool(replication))

    def alter_user(self, name: str, replication: bool) -> AlterUser:
        return AlterUser(name, replication)

    def replication_on(self) -> bool:
        return True

    def replication_off(self) -> bool:
        return False

    def drop_user(self, if_exists: bool | None, name: str) -> ast.DropUser:
        return ast.DropUser(name, if_exists is not None)

    def create_token(self, user: str, expires: Token | None) -> ast.CreateToken:
        return ast.CreateToken(user, None if expires is None else _unquote(expires))

    def drop_token(self, token: Token) -> ast.DropToken:
        return ast.DropToken(token=_unquote(token))

    def drop_token_for(self, user: str) -> ast.DropToken:
        return ast.DropToken(user=user)

    def grant_role(self, role: str, database: str, grantee: str) -> ast.GrantRole:
        return ast.GrantRole(role, database, grantee)

    def revoke_role(self, role: str, database: str, grantee: str) -> ast.RevokeRole:
        return ast.RevokeRole(role, database, grantee)

    def grant_select(self, table: str, grantee: str) -> ast.GrantSelect:
        return ast.GrantSelect(table, grantee)

    def revoke_select(self, table: str, grantee: str) -> ast.RevokeSelect:
        return ast.RevokeSelect(table, grantee)

    def grantee(self, name: str) -> str:
        return name

    def public(self) -> str:
        return ast.PUBLIC
