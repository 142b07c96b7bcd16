"""The type a statement gives each of its parameters, for ParameterDescription.

Drivers such as asyncpg ask the server the type of every `$n` and encode the values they
are given by it. PostgreSQL infers those from the context; so does this, for the places
parameters stand in practice: a value of an INSERT row or UPDATE assignment (the column's
type), one side of a comparison or arithmetic with a column or constant on the other,
BETWEEN or IN with a column, a LIKE pattern
(text), LIMIT and OFFSET (bigint). A parameter found nowhere of those is text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from refimpl.sql import ast

ColumnTypes = Callable[[str], dict[str, str]]  # table -> {lower-case column: type}

# Operators whose two sides share a type: a parameter on one side takes the other's.
_SAME_TYPED = frozenset({"=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"})


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


def _tables(statement: ast.Statement) -> list[str]:
    names = [node.name for node in _walk(statement) if isinstance(node, ast.TableSource)]
    table = getattr(statement, "table", None)
    if isinstance(table, str):
        names.append(table)
    return names


def param_types(statement: ast.Statement, column_types: ColumnTypes) -> dict[int, str]:
    """Parameter index (0-based, text order) -> the column type it takes, where one is clear."""
    columns: dict[str, str] = {}
    for table in _tables(statement):
        for name, type_ in column_types(table).items():
            columns.setdefault(name, type_)
    found: dict[int, str] = {}

    def give(param: object, type_: str | None) -> None:
        if isinstance(param, ast.Param) and type_ is not None:
            found.setdefault(param.index, type_)

    def type_of(expr: object) -> str | None:
        if isinstance(expr, ast.ColumnRef):
            return columns.get(expr.name.lower())
        if isinstance(expr, ast.Cast):
            return expr.type
        if isinstance(expr, ast.Literal) and expr.type != "NULL":
            return expr.type
        return None

    if isinstance(statement, ast.Insert) and statement.rows is not None:
        names = statement.columns
        table = column_types(statement.table)
        order = [n.lower() for n in names] if names else list(table)
        for row in statement.rows:
            for name, value in zip(order, row, strict=False):
                give(value, table.get(name))
    if isinstance(statement, ast.Update):
        for name, value in statement.assignments:
            give(value, columns.get(name.lower()))
    for node in _walk(statement):
        if isinstance(node, ast.Binary) and node.op in _SAME_TYPED:
            give(node.right, type_of(node.left))
            give(node.left, type_of(node.right))
        elif isinstance(node, ast.Between):
            give(node.low, type_of(node.operand))
            give(node.high, type_of(node.operand))
        elif isinstance(node, ast.InList):
            for item in node.items:
                give(item, type_of(node.operand))
        elif isinstance(node, ast.Like):
            give(node.pattern, "STRING")
        elif isinstance(node, ast.Cast):
            give(node.operand, node.type)
        elif isinstance(node, ast.Select):
            give(node.limit, "BIGINT")
            give(node.offset, "BIGINT")
    return found
