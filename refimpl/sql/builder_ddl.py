"""Parse-tree reductions of table definitions: CREATE TABLE with its keys, UNIQUE constraints
and indexes, CREATE INDEX, DROP INDEX, and EXPLAIN.

`DdlBuilder` is a part of `refimpl.sql.builder.Builder` (which inherits it), kept apart so
that each module stays one job. It checks what the grammar cannot (one PRIMARY KEY, at least
one column) and raises SqlSyntaxError at the offending token.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from refimpl.errors import NotAllowed, SqlSyntaxError
from refimpl.sql import ast, ast_types


def error_at(token: Token, message: str) -> SqlSyntaxError:
    """A syntax error placed at `token` (its line and column lead the message)."""
    return SqlSyntaxError(
        f"line {token.line}, column {token.column}: {message}", token.line, token.column
    )


class _PrimaryKeyClause:
    """A table-level `PRIMARY KEY (a, b)` while its CREATE TABLE is being built."""

    __slots__ = ("token", "columns")

    def __init__(self, token: Token, columns: tuple[str, ...]) -> None:
        self.token = token
        self.columns = columns


class _UniqueClause:
    """A table-level `UNIQUE (a, b)`."""

    __slots__ = ("columns",)

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns


class _ColumnClause:
    """A column definition and its constraints (the PRIMARY KEY token, UNIQUE)."""

    __slots__ = ("column", "primary", "unique", "not_null")

    def __init__(
        self, column: ast.ColumnDef, primary: Token | None, unique: bool, not_null: bool
    ) -> None:
        self.column = column
        self.primary = primary
        self.unique = unique
        self.not_null = not_null


_UNIQUE = object()  # a column's UNIQUE constraint, as column_def receives it
_NOT_NULL = object()  # a column's NOT NULL


@v_args(inline=True)
class DdlBuilder(Transformer):
    """Reductions of table definitions, index statements and EXPLAIN."""

    def create_table(self, if_not_exists: bool | None, name: str, *rest: Any) -> ast.CreateTable:
        *elements, timeseries, partition, sort_by, dedup_key, replica_full = rest
        columns: list[ast.ColumnDef] = []
        unique: list[tuple[str, ...]] = []
        indexes: list[ast.IndexDef] = []
        primary_key: tuple[str, ...] = ()
        key_token = None
        for element in elements:
            if isinstance(element, _UniqueClause):
                unique.append(element.columns)
                continue
            if isinstance(element, ast.IndexDef):
                indexes.append(element)
                continue
            if isinstance(element, _PrimaryKeyClause):
                token, keys = element.token, element.columns
            else:
                columns.append(element.column)
                if element.unique:
                    unique.append((element.column.name,))
                if element.primary is None:
                    continue
                token, keys = element.primary, (element.column.name,)
            if key_token is not None:
                raise error_at(
                    token,
                    "a table has one primary key: declare a key of several "
                    "columns as PRIMARY KEY (a, b) after the columns",
                )
            key_token, primary_key = token, keys
        key_names = {k.lower() for k in primary_key}
        for element in elements:
            if isinstance(element, _ColumnClause) and element.not_null:
                if element.column.name.lower() not in key_names:
                    raise NotAllowed(
                        f"NOT NULL on column '{element.column.name}' is not supported: only"
                        " the primary key's columns refuse NULL here; leave NOT NULL out, or"
                        " make the column part of the PRIMARY KEY"
                    )
        if not columns:
            message = "a table needs at least one column"
            # Only UNIQUE or INDEX clauses: no token of a key to place the error at.
            raise error_at(key_token, message) if key_token else SqlSyntaxError(message)
        unit, symbol = partition or (None, None)
        return ast.CreateTable(
            name,
            tuple(columns),
            if_not_exists is not None,
            primary_key,
            timeseries,
            unit,
            symbol,
            sort_by or (),
            dedup_key or (),
            tuple(unique),
            tuple(indexes),
            bool(replica_full),
        )

    def replica_identity(self, table: str, full: bool) -> ast.AlterReplicaIdentity:
        return ast.AlterReplicaIdentity(table, full)

    def replica_identity_clause(self, full: bool) -> bool:
        return full

    def replica_mode(self, mode: Token) -> bool:
        return str(mode).upper() == "FULL"

    def column_def(self, name: str, type_: str, *constraints: Any) -> _ColumnClause:
        if type_ in ast_types.FUNCTION_CASTS:
            raise NotAllowed(
                f"the type {type_} is not supported for a column;"
                f" {ast_types.UNSUPPORTED_TYPES.get(type_, 'use BIGINT')}"
            )
        primary = next((c for c in constraints if isinstance(c, Token)), None)
        return _ColumnClause(
            ast.ColumnDef(name, type_), primary, _UNIQUE in constraints, _NOT_NULL in constraints
        )

    def column_not_null(self) -> object:
        return _NOT_NULL

    def column_nullable(self) -> None:
        return None  # NULL: the default, said out loud

    def column_primary_key(self, token: Token) -> Token:
        return token

    def column_unique(self, token: Token) -> object:
        return _UNIQUE

    def primary_key_def(self, token: Token, columns: tuple[str, ...]) -> _PrimaryKeyClause:
        return _PrimaryKeyClause(token, columns)

    def unique_def(self, token: Token, columns: tuple[str, ...]) -> _UniqueClause:
        return _UniqueClause(columns)

    def index_def(self, unique: Token | None, name: str, columns: tuple[str, ...]) -> ast.IndexDef:
        return ast.IndexDef(name, columns, unique is not None)

    def index_name(self, name: str) -> str:
        return name

    def index_columns(self, *columns: str) -> tuple[str, ...]:
        return columns

    def index_column(self, name: str, direction: bool | None) -> str:
        return name  # an index serves both directions: ASC and DESC are read and not kept

    def create_index(
        self,
        unique: Token | None,
        if_not_exists: bool | None,
        name: str,
        table: str,
        columns: tuple[str, ...],
    ) -> ast.CreateIndex:
        index = ast.IndexDef(name, columns, unique is not None)
        return ast.CreateIndex(table, index, if_not_exists is not None)

    def drop_index(self, if_exists: bool | None, name: str, table: str | None) -> ast.DropIndex:
        return ast.DropIndex(name, if_exists is not None, table)

    def explain(self, query: ast.Statement) -> ast.Explain:
        return ast.Explain(query)
