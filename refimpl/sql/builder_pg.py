"""Reductions of the PostgreSQL spellings that psql and drivers send: schema-qualified
names (`pg_catalog.pg_class`, `pg_catalog.format_type(...)`), `OPERATOR(pg_catalog.~)`,
`COLLATE`, and `E'...'` strings with backslash escapes.

The schemas are `pg_catalog`, `public` and `information_schema`. A name in either of the
first two is the bare name (the catalog relations and functions are found by it), a name in
`information_schema` keeps its schema (`information_schema.tables`: the relations of that
schema are found by it); any other schema is an error.
"""

from __future__ import annotations

import re

from lark import Token, Transformer, v_args

from refimpl.errors import NotAllowed, SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.builder_values import refuse_keyword_call

SCHEMAS = frozenset({"pg_catalog", "public"})
# PostgreSQL type names in `x::type` -> the type they stand for. OIDs and the reg* types
# are numbers of the catalog's type OID here (an integer the protocol calls oid).
_CAST_TYPES = {
    "text": "STRING", "varchar": "STRING", "name": "STRING", "char": "STRING",
    "int": "INT", "int4": "INT", "integer": "INT", "int2": "INT", "smallint": "INT",
    "int8": "BIGINT", "bigint": "BIGINT", "oid": "OID", "regclass": "OID",
    "regtype": "OID", "regproc": "OID", "regnamespace": "OID", "uuid": "STRING",
    "regrole": "OID", "float8": "DOUBLE", "float4": "DOUBLE",
    "numeric": "DOUBLE", "bool": "BOOLEAN", "boolean": "BOOLEAN",
    "timestamptz": "TIMESTAMP", "timestamp": "TIMESTAMP",
}  # fmt: skip
# Casts that read a value as PostgreSQL's input function does: a relation's or a type's
# name becomes its OID, a UUID's text its canonical form; written as PostgreSQL's function
# spelling of the cast (`regclass('t')`), which the engine's functions of those names answer.
_FUNCTION_CASTS = frozenset({"regclass", "regtype", "uuid"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", "'": "'"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{4}|[0-7]{1,3}|.)", re.DOTALL)


def _unschema(schema: str, name: str) -> str:
    if schema.lower() == "information_schema":
        # Kept in the name: its relations are found by it, and hide no table of the database.
        return f"information_schema.{name}"
    if schema.lower() not in SCHEMAS:
        raise SqlSyntaxError(
            f"schema '{schema}' does not exist; the schemas are pg_catalog, public and"
            " information_schema, and a table needs none"
        )
    return name


def cast_to(operand: ast.Expr, target: str) -> ast.Expr:
    """`CAST(operand AS target)`; a `regtype`'s text is the type's name, as PostgreSQL writes
    it (`atttypid::regtype::text` is `integer`), not its OID's digits."""
    if target == "STRING" and isinstance(operand, ast.FuncCall) and operand.name == "regtype":
        return ast.FuncCall("format_type", (operand, ast.Literal(None, "NULL")))
    return ast.Cast(operand, target)


def _string(token: Token) -> str:
    return str(token)[1:-1].replace("''", "'")


def _escape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xu" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code[0].isdigit():
        return chr(int(code, 8))
    return _ESCAPES.get(code, code)


@v_args(inline=True)
class PgBuilder(Transformer):
    def qualified_table_name(self, schema: str, name: str) -> str:
        return _unschema(schema, name)

    # COPY's older options, without parentheses: the options of the same names.
    def legacy_csv(self) -> ast.CopyOption:
        return ast.CopyOption("format", "csv")

    def legacy_binary(self) -> ast.CopyOption:
        return ast.CopyOption("format", "binary")

    def legacy_header(self) -> ast.CopyOption:
        return ast.CopyOption("header", True)

    def legacy_delimiter(self, text: Token) -> ast.CopyOption:
        return ast.CopyOption("delimiter", _string(text))

    def legacy_null(self, text: Token) -> ast.CopyOption:
        return ast.CopyOption("null", _string(text))

    def legacy_quote(self, text: Token) -> ast.CopyOption:
        return ast.CopyOption("quote", _string(text))

    def legacy_escape(self, text: Token) -> ast.CopyOption:
        return ast.CopyOption("escape", _string(text))

    def call_ordered(
        self, name: str, args: tuple[ast.Expr, ...], order_by: tuple[ast.OrderItem, ...]
    ) -> ast.FuncCall:
        """`array_agg(x ORDER BY y)`: an aggregate's call with its own order of input rows."""
        return ast.FuncCall(name.lower(), args, order_by=order_by)

    def call_distinct_ordered(
        self, name: str, args: tuple[ast.Expr, ...], order_by: tuple[ast.OrderItem, ...]
    ) -> ast.FuncCall:
        """`string_agg(DISTINCT x, ',' ORDER BY x)`."""
        return ast.FuncCall(name.lower(), args, distinct=True, order_by=order_by)

    def window_call(
        self,
        name: str,
        args: tuple[ast.Expr, ...] | None,
        partition_by: tuple[ast.Expr, ...] | None,
        order_by: tuple[ast.OrderItem, ...] | None,
    ) -> ast.WindowCall:
        """`row_number() OVER (PARTITION BY a ORDER BY b)`."""
        return ast.WindowCall(name.lower(), args or (), partition_by or (), order_by or ())

    def field_select(self, operand: ast.Expr, field: str) -> ast.FieldSelect:
        return ast.FieldSelect(operand, field.lower())

    def trim_from(
        self, name: str, side: str, chars: ast.Expr | None, text: ast.Expr
    ) -> ast.FuncCall:
        """`trim([both | leading | trailing] [chars] FROM text)`: btrim, ltrim or rtrim."""
        if name.lower() != "trim":
            raise NotAllowed(f"{name}(... FROM ...) is not supported; only trim() takes FROM here")
        return ast.FuncCall(side, (text,) if chars is None else (text, chars))

    def trim_chars_from(self, name: str, chars: ast.Expr, text: ast.Expr) -> ast.FuncCall:
        return self.trim_from(name, "btrim", chars, text)

    def trim_both(self) -> str:
        return "btrim"

    def trim_leading(self) -> str:
        return "ltrim"

    def trim_trailing(self) -> str:
        return "rtrim"

    def window_partition(self, items: tuple[ast.Expr, ...]) -> tuple[ast.Expr, ...]:
        return items

    def array_value(self, items: tuple[ast.Expr, ...] | None) -> ast.ArrayValue:
        return ast.ArrayValue(items or ())

    def schema_column(self, schema: str, table: str, name: str) -> ast.ColumnRef:
        """`pg_catalog.pg_class.relname`: a column of a table named with its schema. An
        information_schema view is named by its bare name in a query, as in PostgreSQL
        (`tables.table_name`, `information_schema.tables.table_name` alike)."""
        _unschema(schema, table)
        return ast.ColumnRef(name, table)

    def qualified_call(self, schema: str, name: str, args: tuple | None) -> ast.FuncCall:
        name = _unschema(schema, name).lower()
        refuse_keyword_call(name)
        return ast.FuncCall(name, args or ())

    def pg_operator(self, schema: str, op: str) -> str:
        _unschema(schema, op)
        return op

    def op_symbol(self, token: Token) -> str:
        return "<>" if token == "!=" else str(token)

    def collate(self, operand: ast.Expr, *collation: str) -> ast.Expr:
        # Text compares by code point here whatever the collation: the clause changes nothing.
        return operand

    def array_quantified(
        self, operand: ast.Expr, op: str, quantifier: str, array: ast.Expr
    ) -> ast.ArrayQuantified:
        return ast.ArrayQuantified(op, operand, quantifier, array)

    def array_subquery(self, query: ast.Query) -> ast.ArraySubquery:
        return ast.ArraySubquery(query)

    def qualified_function_name(self, schema: str, name: str) -> str:
        return _unschema(schema, name).lower()

    def subscript(self, array: ast.Expr, index: ast.Expr) -> ast.Subscript:
        return ast.Subscript(array, index)

    def pg_array_cast(self, operand: ast.Expr, *name: str | None) -> ast.Expr:
        """`x::int2[]`: an array is its text here (see `ast.ArraySubquery`), so the cast
        checks the element type's name and leaves the text as it is; the element's name is
        kept for a parameter's type (`$1::oid[]` is described as oid[])."""
        self.pg_cast(ast.Literal(None, "NULL"), *name)
        element = name[1] if name[1] is not None else name[0]
        assert element is not None
        return ast.Cast(operand, "STRING", element.lower())

    def pg_timestamp_cast(self, operand: ast.Expr, *precision: Token | None) -> ast.Expr:
        """`x::TIMESTAMP WITH TIME ZONE` (or WITHOUT): a TIMESTAMP, always in UTC here."""
        return ast.Cast(operand, "TIMESTAMP")

    def pg_text_cast(self, operand: ast.Expr, *length: Token | None) -> ast.Expr:
        return cast_to(operand, "STRING")

    def pg_cast(self, operand: ast.Expr, *name: str | None) -> ast.Expr:
        """`x::type`: a CAST to the column type a PostgreSQL type name stands for."""
        schema, type_name = (name[0], name[1]) if name[1] is not None else (None, name[0])
        if schema is not None:
            _unschema(schema, type_name or "")
        assert type_name is not None
        if type_name.lower() in _FUNCTION_CASTS:
            return ast.FuncCall(type_name.lower(), (operand,))
        target = _CAST_TYPES.get(type_name.lower())
        if target is None:
            raise SqlSyntaxError(
                f"type {type_name} is not known here; cast to one of"
                f" {', '.join(sorted(_CAST_TYPES))}"
            )
        return cast_to(operand, target)

    def dollar_string(self, token: Token) -> ast.Literal:
        """`$$it's$$`: PostgreSQL's dollar quoting; the text between is taken as it is."""
        return ast.Literal(str(token)[2:-2], "STRING")

    def escape_string(self, token: Token) -> ast.Literal:
        body = token[2:-1].replace("''", "'")
        return ast.Literal(_ESCAPE.sub(_escape, body), "STRING")
