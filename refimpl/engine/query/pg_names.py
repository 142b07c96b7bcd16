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

from refimpl.engine.query.compiled import Scope
from refimpl.engine.result import Column
from refimpl.errors import SqlError
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
_NAMED = {ast.Exists: "exists", ast.ArrayValue: "array"}
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


def pg_types(items: Sequence[ast.SelectItem], scope: Scope | None = None) -> list[str | None]:
    """Each item's type as PostgreSQL types it where its column type does not say it
    (`Column.pg_type`), else None: see `pg_type`."""
    return [pg_type(item.expr, scope) for item in items]


def pg_type(expr: ast.Expr, scope: Scope | None) -> str | None:
    """PostgreSQL's type of `expr` where its column type does not say it, else None: a call
    of one of `_CALL_TYPES`; a column of `scope` that has one (a subquery's, a view's, a
    WITH table's: `ScopeColumn.pg_type`); a scalar subquery's one column; and what
    PostgreSQL's rules keep of it: `date_trunc(unit, timestamp)` and max or min of a
    timestamp are timestamps; a CASE, coalesce or nullif has its values' common type
    (`_common_type`; a string constant or NULL takes the others', as an `unknown` does).
    An operator over one (`current_user || ''`) and a cast are typed as this engine types
    them, as in PostgreSQL (text)."""
    kind = type(expr)
    if kind is ast.FuncCall:
        assert isinstance(expr, ast.FuncCall)
        name, args = expr.name, expr.args
        if name in _CALL_TYPES:
            return _CALL_TYPES[name]
        if name == "nullif" and args and not _untyped(args[0]):
            return pg_type(args[0], scope)  # its answer is its first argument, or NULL
        if name in _SAME_TYPE:
            return _common(args, scope)
        if name == "date_trunc" and len(args) == 2 or name in ("max", "min") and len(args) == 1:
            return "timestamp" if pg_type(args[-1], scope) == "timestamp" else None
        return None
    if kind is ast.ColumnRef and scope is not None:
        assert isinstance(expr, ast.ColumnRef)
        try:
            return scope.resolve(expr).pg_type
        except SqlError:  # an outer query's column, or none: its compile says which
            return None
    if kind is ast.Case:
        assert isinstance(expr, ast.Case)
        return _common([then for _, then in expr.whens] + [expr.else_ or _NULL], scope)
    if kind is ast.ScalarSubquery:
        assert isinstance(expr, ast.ScalarSubquery)
        columns = _answered(expr, scope)
        if columns is not None:
            return columns[0].pg_type if columns else None
        types = query_pg_types(expr.query)
        return types[0] if types else None
    return None


def _answered(expr: ast.ScalarSubquery, scope: Scope | None) -> list[Column] | None:
    """The columns a scalar subquery answered where `scope`'s planner prepared it (its
    compile did), typed by what it reads (`(SELECT u FROM v)`); None where none did."""
    if scope is None or scope.subqueries is None:
        return None
    return scope.subqueries.prepared_columns(expr.query)


def pg_typmods(items: Sequence[ast.SelectItem], scope: Scope | None = None) -> list[int]:
    """Each item's type modifier as PostgreSQL gives it (`Column.pg_typmod`): see
    `pg_typmod`."""
    return [pg_typmod(item.expr, scope) for item in items]


def pg_typmod(expr: ast.Expr, scope: Scope | None) -> int:
    """PostgreSQL's type modifier of `expr`, -1 where it has none: the precision of
    `CURRENT_TIMESTAMP(p)` and `LOCALTIMESTAMP(p)`; a column's of `scope`
    (`ScopeColumn.pg_typmod`); a scalar subquery's one column's; nullif's first
    argument's; a CASE's or coalesce's where all its values but constants and NULLs have
    the same one; -1 for any other expression (date_trunc, max, an operator)."""
    kind = type(expr)
    if kind is ast.FuncCall:
        assert isinstance(expr, ast.FuncCall)
        name, args = expr.name, expr.args
        if name in _PRECISE and len(args) == 1 and isinstance(args[0], ast.Literal):
            return args[0].value if type(args[0].value) is int else -1
        if name == "nullif" and args:  # its answer is its first argument, or NULL
            return pg_typmod(args[0], scope)
        if name in _EXTREMES:  # a NULL or constant among them has none: -1 then
            given = {pg_typmod(arg, scope) for arg in args}
            return given.pop() if len(given) == 1 else -1
        return _common_typmod(args, scope) if name == "coalesce" else -1
    if kind is ast.ColumnRef and scope is not None:
        assert isinstance(expr, ast.ColumnRef)
        try:
            return scope.resolve(expr).pg_typmod
        except SqlError:  # an outer query's column, or none: its compile says which
            return -1
    if kind is ast.Case:
        assert isinstance(expr, ast.Case)
        return _common_typmod([then for _, then in expr.whens] + [expr.else_ or _NULL], scope)
    if kind is ast.ScalarSubquery:
        assert isinstance(expr, ast.ScalarSubquery)
        columns = _answered(expr, scope)
        if columns is not None:
            return columns[0].pg_typmod if columns else -1
        typmods = query_pg_typmods(expr.query)
        return typmods[0] if typmods else -1
    return -1


def query_pg_typmods(query: ast.Query) -> list[int]:
    """The `pg_typmod`s of a query's columns as its text says them (`query_pg_types`)."""
    if isinstance(query, ast.Select):
        return pg_typmods(query.items)
    if isinstance(query, ast.SetOperation):
        left, right = query_pg_typmods(query.left), query_pg_typmods(query.right)
        return [a if a == b else -1 for a, b in zip(left, right, strict=False)]
    if isinstance(query, ast.WithQuery):
        return query_pg_typmods(query.body)
    return values_pg_typmods(query.rows, None)


def query_pg_types(query: ast.Query) -> list[str | None]:
    """The `pg_type`s of a query's columns as its text says them, without its sources'
    (a scalar subquery's: `(SELECT current_user)`)."""
    if isinstance(query, ast.Select):
        return pg_types(query.items)
    if isinstance(query, ast.SetOperation):
        return set_pg_types(
            query_pg_types(query.left),
            query_pg_types(query.right),
            untyped_columns(query.left),
            untyped_columns(query.right),
        )
    if isinstance(query, ast.WithQuery):
        return query_pg_types(query.body)
    return values_pg_types(query.rows, None)


def values_pg_types(rows: Sequence[Sequence[ast.Expr]], scope: Scope | None) -> list[str | None]:
    """The `pg_type`s of a VALUES list's columns: each its rows' common type
    (`_common_type`; a string constant or NULL takes the others')."""
    return [_common([row[i] for row in rows], scope) for i in range(len(rows[0]))]


def values_pg_typmods(rows: Sequence[Sequence[ast.Expr]], scope: Scope | None) -> list[int]:
    """The type modifiers of a VALUES list's columns: the one all its rows have, else -1
    (a NULL's or a constant's is -1), as PostgreSQL's."""
    typmods = []
    for i in range(len(rows[0])):
        given = {pg_typmod(row[i], scope) for row in rows}
        typmods.append(given.pop() if len(given) == 1 else -1)
    return typmods


def untyped_columns(query: ast.Query) -> list[bool]:
    """Which columns of a side of a set operation are a string constant or NULL, which
    PostgreSQL types as the other side's column (`unknown`); a VALUES list's or a set
    operation's are typed (text) by then. A select list with `*` says none."""
    if isinstance(query, ast.WithQuery):
        return untyped_columns(query.body)
    if not isinstance(query, ast.Select) or any(type(i.expr) is ast.Star for i in query.items):
        return []
    return [_untyped(item.expr) for item in query.items]


def set_pg_types(
    left: Sequence[str | None],
    right: Sequence[str | None],
    left_untyped: Sequence[bool],
    right_untyped: Sequence[bool],
) -> list[str | None]:
    """The `pg_type`s of a set operation's columns: PostgreSQL's common type of its sides'
    (`_common_type`), where a side's constant takes the other's (`untyped_columns`)."""
    width = len(left)
    left_untyped = [*left_untyped, *[False] * width][:width]
    right_untyped = [*right_untyped, *[False] * width][:width]
    sides = zip(left, right, left_untyped, right_untyped, strict=False)
    return [
        _common_type([t for t, untyped in ((a, a_open), (b, b_open)) if not untyped])
        for a, b, a_open, b_open in sides
    ]


def typed_column(
    name: str, column_type: str, pg_name: str | None, pg_type: str | None, pg_typmod: int
) -> Column:
    """A result column with PostgreSQL's type where its column type holds its values
    (`kept`), and its type modifier where it is a TIMESTAMP (the clock's precision)."""
    typmod = pg_typmod if column_type == "TIMESTAMP" else -1
    return Column(name, column_type, pg_name, kept(pg_type, column_type), typmod)


def kept(pg_type: str | None, column_type: str) -> str | None:
    """`pg_type` where the column's type holds its values (a `name` is a STRING here, a
    `timestamp` a TIMESTAMP), else None: what this engine computed is another type."""
    return pg_type if pg_type is not None and _HELD_AS[pg_type] == column_type else None


_HELD_AS = {"name": "STRING", "timestamp": "TIMESTAMP"}
_NULL = ast.Literal(None, "NULL")
# The calls whose one argument is their answer's precision, its type modifier.
_PRECISE = frozenset({"current_timestamp", "localtimestamp"})
# Functions whose answer is of their arguments' common type (`_common_type`).
_EXTREMES = frozenset({"greatest", "least"})
_SAME_TYPE = frozenset({"coalesce", "nullif"}) | _EXTREMES


def _is_null(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Literal) and expr.type == "NULL"


def _untyped(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Literal) and expr.type in ("STRING", "NULL")


def _common(exprs: Sequence[ast.Expr], scope: Scope | None) -> str | None:
    """The common `pg_type` of `exprs` but their string constants and NULLs."""
    return _common_type([pg_type(e, scope) for e in exprs if not _untyped(e)])


def _common_typmod(exprs: Sequence[ast.Expr], scope: Scope | None) -> int:
    """The type modifier all of `exprs` but their NULLs have, else -1 (a CASE's or
    coalesce's in PostgreSQL, whose planner drops a NULL; a string constant read as a
    timestamp has none)."""
    typmods = {pg_typmod(e, scope) for e in exprs if not _is_null(e)}
    return typmods.pop() if len(typmods) == 1 else -1


def _common_type(types: Sequence[str | None]) -> str | None:
    """PostgreSQL's common type (its `select_common_type`) of values of `types`, in order
    (None: the column type's own): the first where each converts to the other implicitly
    (`name` before text is `name`, text before `name` text); `timestamp` only among
    timestamps (with a `timestamptz`, that one, its category's preferred type)."""
    if not types:
        return None
    first = types[0]
    return first if first == "name" or all(t == first for t in types) else None


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
            return _strong(expr.operand) or _ELEMENT_NAMES.get(element, element)
        return _strong(expr.operand) or _TYPE_NAMES.get(expr.type, expr.type.lower())
    if isinstance(expr, ast.Case):
        return (None if expr.else_ is None else _strong(expr.else_)) or "case"
    if isinstance(expr, ast.ArraySubquery):
        return "array"
    if isinstance(expr, ast.ScalarSubquery):
        return _first_column(expr.query)
    return _NAMED.get(type(expr))


def _strong(expr: ast.Expr) -> str | None:
    """`_figure`'s name where PostgreSQL holds it strong enough to name a CASE by its ELSE or
    a cast by what it casts: None for a CASE's own `case` or a cast's type name (`CASE ...
    ELSE x END` is `x`, `CASE ... ELSE 1 END` `case`, `(CASE ... END)::text` `text`)."""
    if isinstance(expr, ast.Case):
        return None if expr.else_ is None else _strong(expr.else_)
    if isinstance(expr, ast.Cast):
        return _strong(expr.operand)
    if isinstance(expr, ast.Subscript):
        return _strong(expr.array)
    return _figure(expr)


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
