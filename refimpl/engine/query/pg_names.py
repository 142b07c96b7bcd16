"""A select list's column names: this engine's (`column_name`, spec/sql.md) and, where it
differs, the one PostgreSQL gives (`pg_names`): `SELECT 1` is `?column?` in PostgreSQL, `1`
over /exec. A protocol that speaks PostgreSQL's names a column so; the engine keeps both
(`Column.pg_name`).

PostgreSQL's rule (its `FigureColname`): a column by its name, a function or window call by
the function's name, a subscript by its array's name, `(r).x` by `x`, a cast by the name of
what it casts or, when that has none, by the type's name (`1::text` is `text`), `ARRAY[...]`
and `ARRAY(SELECT ...)` `array`, `CASE` `case`, `EXISTS` `exists`, a scalar subquery by its
one column's name; anything else (a constant, an operator, IS NULL, IN, ...) `?column?`.
"""

from __future__ import annotations

from collections.abc import Sequence

from refimpl.sql import ast

UNNAMED = "?column?"
# A cast's type as PostgreSQL names it (the type's own name, `int4` for INTEGER).
_TYPE_NAMES = {
    "INT": "int4",
    "BIGINT": "int8",
    "DOUBLE": "float8",
    "STRING": "text",
    "SYMBOL": "text",
    "BOOLEAN": "bool",
    "TIMESTAMP": "timestamptz",
    "OID": "oid",
}
# PostgreSQL's element names of an array cast, as its grammar rewrites them (`int[]` is int4).
_ELEMENT_NAMES = {"int": "int4", "integer": "int4", "smallint": "int2", "bigint": "int8"}
_NAMED = {ast.Case: "case", ast.Exists: "exists", ast.ArrayValue: "array"}
# PostgreSQL's types of calls whose values this engine holds as another type: the names of
# the session (its `name`, a STRING here) and LOCALTIMESTAMP (its `timestamp` without time
# zone: a TIMESTAMP here, the same moment in the session's UTC).
_CALL_TYPES = dict.fromkeys(
    (
        "current_user",
        "session_user",
        "user",
        "current_role",
        "current_catalog",
        "current_schema",
        "current_database",
    ),
    "name",
) | {"localtimestamp": "timestamp"}


def column_name(item: ast.SelectItem) -> str:
    """A result column's name: its alias, the column's name, the function's, or its text."""
    if item.alias:
        return item.alias
    expr = item.expr
    if isinstance(expr, ast.ColumnRef):
        return expr.name
    if isinstance(expr, ast.FuncCall):
        return expr.name
    if isinstance(expr, ast.Cast) and isinstance(expr.operand, ast.ColumnRef):
        return expr.operand.name
    from refimpl.sql.printer import to_sql

    return to_sql(expr)


def pg_names(items: Sequence[ast.SelectItem]) -> list[str | None]:
    """Each item's name by PostgreSQL's rule where it differs from `column_name`'s, else
    None (an alias, a column and a function call are named alike)."""
    names: list[str | None] = []
    for item in items:
        pg_name = None if item.alias else pg_column_name(item.expr)
        names.append(None if pg_name == column_name(item) else pg_name)
    return names


def pg_types(items: Sequence[ast.SelectItem]) -> list[str | None]:
    """Each item's type as PostgreSQL types it where its column type does not say it
    (`Column.pg_type`): a call of one of `_CALL_TYPES` as the whole item; else None (an
    expression over such a call is typed as this engine types it)."""
    return [
        _CALL_TYPES.get(item.expr.name) if type(item.expr) is ast.FuncCall else None
        for item in items
    ]


def pg_column_name(expr: ast.Expr) -> str:
    """The name PostgreSQL gives a select list's item `expr` that has no alias."""
    return _figure(expr) or UNNAMED


def _figure(expr: ast.Expr) -> str | None:
    """PostgreSQL's name of `expr`, None where it has none of its own (`?column?`)."""
    if isinstance(expr, ast.ColumnRef):
        return expr.name
    if isinstance(expr, ast.FuncCall | ast.WindowCall):
        return expr.name
    if isinstance(expr, ast.FieldSelect):
        return expr.field
    if isinstance(expr, ast.Subscript):
        return _figure(expr.array)
    if isinstance(expr, ast.Cast):
        if expr.element is not None:
            element = expr.element.lower()
            return _figure(expr.operand) or _ELEMENT_NAMES.get(element, element)
        return _figure(expr.operand) or _TYPE_NAMES.get(expr.type, expr.type.lower())
    if isinstance(expr, ast.ArraySubquery):
        return "array"
    if isinstance(expr, ast.ScalarSubquery):
        return _first_column(expr.query)
    return _NAMED.get(type(expr))


def _first_column(query: ast.Query) -> str:
    """The name of a subquery's one column, as PostgreSQL names a scalar subquery."""
    while not isinstance(query, ast.Select):
        if isinstance(query, ast.SetOperation):
            query = query.left
        elif isinstance(query, ast.WithQuery):
            query = query.body
        else:
            return "column1"  # VALUES
    if not query.items:
        return UNNAMED
    item = query.items[0]
    return item.alias or pg_column_name(item.expr)
