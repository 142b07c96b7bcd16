"""The expression objects of a window function's call and of a record's field (part of
`refimpl.sql.ast`, which re-exports them: `ast.WindowCall`, `ast.FieldSelect`), and the
canonical text of calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refimpl.sql.ast_base import Expr


@dataclass(frozen=True, slots=True)
class WindowCall(Expr):
    """`row_number() OVER (PARTITION BY a ORDER BY b)`: a window function's call. `name` is
    lower case."""

    name: str
    args: tuple[Expr, ...] = ()
    partition_by: tuple[Expr, ...] = ()
    order_by: tuple[Any, ...] = ()  # ast.OrderItems (ast imports this module)


@dataclass(frozen=True, slots=True)
class FieldSelect(Expr):
    """`(record).field`: a field of a record (`(information_schema._pg_expandarray(a)).n`)."""

    operand: Expr
    field: str


def call_text(
    node: Any,  # an ast.FuncCall or a WindowCall
    expr: Callable[[Expr], str],
    order_item: Callable[[Any], str],
    name: Callable[[str], str],
) -> str:
    """A call's text, its parts written by the printer's `expr`, `order_item` and `name`."""
    if isinstance(node, WindowCall):
        window = []
        if node.partition_by:
            window.append("PARTITION BY " + ", ".join(expr(e) for e in node.partition_by))
        if node.order_by:
            window.append("ORDER BY " + ", ".join(order_item(i) for i in node.order_by))
        args = ", ".join(expr(arg) for arg in node.args)
        return f"{name(node.name)}({args}) OVER ({' '.join(window)})"
    if node.star:
        return f"{name(node.name)}(*)"
    args = ("DISTINCT " if node.distinct else "") + ", ".join(expr(arg) for arg in node.args)
    if node.order_by:
        args += " ORDER BY " + ", ".join(order_item(item) for item in node.order_by)
    return f"{name(node.name)}({args})"
