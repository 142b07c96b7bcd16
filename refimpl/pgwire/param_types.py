"""The type a statement gives each of its parameters: what an untyped `$n` is read as, and
what ParameterDescription tells.

Drivers such as node-postgres send every value as text of no type, and asyncpg asks the
server the type of every `$n` and encodes its values by it. PostgreSQL infers those from the
place a parameter stands; so does this:

- a value of an INSERT row or of an UPDATE assignment: the column's type;
- one side of a comparison or of arithmetic, BETWEEN, IN, `CASE x WHEN`, coalesce, nullif,
  greatest and least: the type of the other side (a column, qualified or not, of a table or
  of a catalog relation, `oid = $1` an OID; a constant, a cast, or an expression of those);
- the argument of a function that takes text (upper, length, ...) or a number (abs, round,
  ...), a LIKE pattern: text, or DOUBLE for the numbers;
- a condition (WHERE, ON, HAVING, AND, OR, NOT, `CASE WHEN`): BOOLEAN; LIMIT and OFFSET:
  BIGINT; `CAST($1 AS t)` and `$1::t`: t (`OID` for oid); `$1::t[]`: an array of t
  (`OID[]` for oid[]), whose value the engine reads as the array's text (`{1,2}`).

A parameter found in none of those places is text, as PostgreSQL reads an unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from refimpl.engine.query.arrays import ARRAY_ELEMENT_TYPES
from refimpl.engine.result import Result
from refimpl.engine.statements.pg_catalog import RELATIONS as CATALOG_RELATIONS
from refimpl.sql import ast

ColumnTypes = Callable[[str], dict[str, str]]  # table -> {lower-case column: type}

# Operators whose two sides share a type: a parameter on one side takes the other's.
_COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">="})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
_LOGIC = frozenset({"AND", "OR"})
# Functions whose arguments and answer share one type (a parameter takes the others').
_SAME_AS_OTHERS = frozenset({"coalesce", "nullif", "greatest", "least", "ifnull"})
_TEXT_FUNCTIONS = frozenset(
    {
        "upper",
        "lower",
        "length",
        "char_length",
        "substr",
        "substring",
        "trim",
        "ltrim",
        "rtrim",
        "replace",
        "concat",
        "left",
        "right",
        "reverse",
        "md5",
        "strpos",
        "starts_with",
        "initcap",
        "lpad",
        "rpad",
    }
)
_NUMBER_FUNCTIONS = frozenset(
    {"abs", "round", "ceil", "ceiling", "floor", "sqrt", "exp", "ln", "log", "power", "sign"}
)
# Positions of a text function's arguments that are counts, not text (substr's start...).
_COUNT_ARGUMENTS = {"substr": (1, 2), "substring": (1, 2), "left": (1,), "right": (1,)}
_NUMERIC = ("INT", "BIGINT", "DOUBLE")
# `$n::t[]`: PostgreSQL's element name -> the array type a client is told (oid[] apart from
# bigint[]: asyncpg's catalog queries send `$1::oid[]` and read it back as oid[]).
_ARRAY_HINTS = {name: f"{element}[]" for name, element in ARRAY_ELEMENT_TYPES.items()}


def _children(node: object) -> Iterator[object]:
    if isinstance(node, tuple | list):
        yield from node
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield getattr(node, f.name)


def _walk(node: object) -> Iterator[object]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(_children(current))


class _Columns:
    """The columns a statement's names can mean: by table name or alias, and by bare name
    (the first table that has it)."""

    def __init__(self, statement: ast.Statement, column_types: ColumnTypes) -> None:
        self.by_table: dict[str, dict[str, str]] = {}
        self.bare: dict[str, str] = {}
        sources = [(n.name, n.alias) for n in _walk(statement) if isinstance(n, ast.TableSource)]
        table = getattr(statement, "table", None)
        if isinstance(table, str):
            sources.append((table, None))
        for name, alias in sources:
            columns = column_types(name)
            self.by_table.setdefault((alias or name).lower(), columns)
            for column, type_ in columns.items():
                self.bare.setdefault(column, type_)

    def type_of(self, ref: ast.ColumnRef) -> str | None:
        if ref.table is not None:
            return self.by_table.get(ref.table.lower(), {}).get(ref.name.lower())
        return self.bare.get(ref.name.lower())


def catalog_column_types(run: Callable[[str], Result], table: str) -> dict[str, str]:
    """The columns of the catalog relation `table` (`pg_attribute`, `information_schema.tables`)
    with their types, from an empty read of it by `run` (a session's `execute`): so that
    `WHERE attrelid = $1` makes `$1` an oid, as in PostgreSQL. {} for any other name."""
    name = table.lower()
    if name not in CATALOG_RELATIONS:
        return {}
    columns = run(f"SELECT * FROM {name} LIMIT 0").columns or []
    return {column.name.lower(): column.type for column in columns}


def table_column_types(run: Callable[[str], Result], table: str) -> dict[str, str]:
    """The columns of `table`, a table or a catalog relation (`catalog_column_types`), with
    their types, read by `run` (a session's `execute`); {} for an unknown name."""
    # SHOW TABLES first: an unknown table's error would roll an open transaction back.
    names = {row[0].lower() for row in run("SHOW TABLES").rows}
    if table.lower() not in names:
        return catalog_column_types(run, table)
    quoted = '"' + table.replace('"', '""') + '"'
    return {row[0].lower(): row[1] for row in run(f"SHOW COLUMNS FROM {quoted}").rows}


def param_types(statement: ast.Statement, column_types: ColumnTypes) -> dict[int, str]:
    """Parameter index (0-based, text order) -> the type its place gives it, where one does."""
    columns = _Columns(statement, column_types)
    found: dict[int, str] = {}

    def give(node: object, type_: str | None) -> None:
        if isinstance(node, ast.Param) and type_ is not None and type_ != "NULL":
            found.setdefault(node.index, type_)

    def type_of(expr: object) -> str | None:
        """The type `expr` has without its parameters' (None: not known from here)."""
        if isinstance(expr, ast.ColumnRef):
            return columns.type_of(expr)
        if isinstance(expr, ast.Cast) and expr.element is not None:
            return _ARRAY_HINTS.get(expr.element, "STRING")
        if isinstance(expr, ast.Cast) and expr.type == "OID":  # `$1::oid`, no column type
            return "OID"
        if isinstance(expr, ast.Cast):
            return ast.TYPE_ALIASES.get(expr.type.upper(), expr.type.upper())
        if isinstance(expr, ast.Literal) and expr.type != "NULL":
            return expr.type
        if isinstance(expr, ast.Param):
            return found.get(expr.index)
        if isinstance(expr, ast.Unary) and expr.op in ("-", "+"):
            return type_of(expr.operand)
        if isinstance(expr, ast.Binary) and expr.op in _ARITHMETIC:
            return type_of(expr.left) or type_of(expr.right)
        if isinstance(expr, ast.Binary) and expr.op == "||":
            return "STRING"
        if isinstance(expr, ast.FuncCall) and expr.name in _SAME_AS_OTHERS:
            return next((t for t in map(type_of, expr.args) if t is not None), None)
        if isinstance(expr, ast.FuncCall) and expr.name in ("count", "length"):
            return "BIGINT"
        if isinstance(expr, ast.FuncCall) and expr.name in ("upper", "lower", "concat"):
            return "STRING"
        if isinstance(expr, ast.Case):
            results = [then for _, then in expr.whens] + [expr.else_]
            return next((t for t in map(type_of, results) if t is not None), None)
        return None

    def place(node: object) -> None:
        if isinstance(node, ast.Binary) and node.op in _COMPARISONS | _ARITHMETIC:
            give(node.right, type_of(node.left))
            give(node.left, type_of(node.right))
        elif isinstance(node, ast.Binary) and node.op in _LOGIC:
            give(node.left, "BOOLEAN")
            give(node.right, "BOOLEAN")
        elif isinstance(node, ast.Binary) and node.op == "||":
            give(node.left, "STRING")
            give(node.right, "STRING")
        elif isinstance(node, ast.Unary) and node.op == "NOT":
            give(node.operand, "BOOLEAN")
        elif isinstance(node, ast.Between):
            for one, others in (
                (node.operand, (node.low, node.high)),
                (node.low, (node.operand, node.high)),
                (node.high, (node.operand, node.low)),
            ):
                give(one, next((t for t in map(type_of, others) if t is not None), None))
        elif isinstance(node, ast.InList):
            operand = type_of(node.operand)
            for item in node.items:
                give(item, operand)
                give(node.operand, type_of(item))
        elif isinstance(node, ast.Like):
            give(node.operand, "STRING")
            give(node.pattern, "STRING")
        elif isinstance(node, ast.Cast):
            give(node.operand, type_of(node))
        elif isinstance(node, ast.Case):
            for condition, _ in node.whens:
                give(condition, type_of(node.operand) if node.operand else "BOOLEAN")
                if node.operand is not None:
                    give(node.operand, type_of(condition))
            for result in [then for _, then in node.whens] + [node.else_]:
                give(result, type_of(node))
        elif isinstance(node, ast.FuncCall):
            _function_place(node, give, type_of)
        elif isinstance(node, ast.Select):
            give(node.where, "BOOLEAN")
            give(node.having, "BOOLEAN")
            give(node.limit, "BIGINT")
            give(node.offset, "BIGINT")
        elif isinstance(node, ast.JoinSource):
            give(node.on, "BOOLEAN")
        elif isinstance(node, ast.Update | ast.Delete):
            give(getattr(node, "where", None), "BOOLEAN")

    if isinstance(statement, ast.Insert) and statement.rows is not None:
        table = column_types(statement.table)
        order = [n.lower() for n in statement.columns] if statement.columns else list(table)
        for row in statement.rows:
            for name, value in zip(order, row, strict=False):
                give(value, table.get(name))
    if isinstance(statement, ast.Update):
        for name, value in statement.assignments:
            give(value, columns.bare.get(name.lower()))
    nodes = list(_walk(statement))
    # Twice: a parameter typed by its place types another beside it (`$1 + $2 = col`).
    for _ in range(2):
        for node in nodes:
            place(node)
    return found


def _function_place(
    call: ast.FuncCall,
    give: Callable[[object, str | None], None],
    type_of: Callable[[object], str | None],
) -> None:
    name = call.name
    if name in _SAME_AS_OTHERS:
        shared = next((t for t in map(type_of, call.args) if t is not None), None)
        for arg in call.args:
            give(arg, shared)
    elif name in _TEXT_FUNCTIONS:
        counts = _COUNT_ARGUMENTS.get(name, ())
        for position, arg in enumerate(call.args):
            give(arg, "BIGINT" if position in counts else "STRING")
    elif name in _NUMBER_FUNCTIONS:
        for position, arg in enumerate(call.args):
            give(arg, "INT" if name == "round" and position == 1 else "DOUBLE")
    elif name in ("sum", "avg", "min", "max") and call.args:
        give(call.args[0], "DOUBLE" if name in ("sum", "avg") else None)
    elif name == "date_trunc" and len(call.args) == 2:
        give(call.args[0], "STRING")
        give(call.args[1], "TIMESTAMP")
