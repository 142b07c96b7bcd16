"""The expression objects of a window function's call and of a record's field (part of
`refimpl.sql.ast`, which re-exports them: `ast.WindowCall`, `ast.FieldSelect`), and the
canonical text of calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refimpl.sql.ast_base import Expr

# SQL's value functions, written as keywords (`current_user`, `CURRENT_TIMESTAMP(3)`): each is
# a call (`FuncCall` of the keyword's name, lower case), so that whatever looks for calls
# (the result cache, shared live answers, kept plans) finds them. The session's: no argument.
SESSION_KEYWORDS = frozenset(
    {"current_user", "session_user", "current_role", "user", "current_catalog", "current_schema"}
)
# The statement's time: no argument, or its precision (a whole number of fractional digits).
CLOCK_KEYWORDS = frozenset({"current_timestamp", "localtimestamp"})
# The most fractional digits a precision keeps (microseconds; PostgreSQL's limit too).
MAX_PRECISION = 6
# Every word the grammar reads as a value function where an expression may start (its
# SESSION_VALUE, CLOCK_VALUE and USER): a name spelled so is quoted there. The date's and the
# time of day's are refused (no DATE or TIME type here).
VALUE_WORDS = SESSION_KEYWORDS | CLOCK_KEYWORDS | {"current_date", "current_time", "localtime"}
# Those PostgreSQL has no function of that name for: a call with parentheses (`user()`,
# `"current_timestamp"()`) is refused, as there. current_user(), current_schema() and
# session_user() are functions too (`"current_user"()`), and `current_user()` is also taken
# bare: spec/sql.md, "Value functions".
KEYWORD_ONLY = frozenset({"user", "current_role", "current_catalog"}) | CLOCK_KEYWORDS


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
    if _keyword_form(node):
        return node.name if not node.args else f"{node.name}({node.args[0].value})"
    if node.star:
        return f"{name(node.name)}(*)"
    args = ("DISTINCT " if node.distinct else "") + ", ".join(expr(arg) for arg in node.args)
    if node.order_by:
        args += " ORDER BY " + ", ".join(order_item(item) for item in node.order_by)
    return f"{name(node.name)}({args})"


def _keyword_form(node: Any) -> bool:
    """Whether a call is written as its keyword: `current_user`, `current_timestamp(3)`."""
    if node.star or node.distinct or node.order_by:
        return False
    if node.name in SESSION_KEYWORDS:
        return not node.args
    if node.name not in CLOCK_KEYWORDS or len(node.args) > 1:
        return False
    precision = node.args[0] if node.args else None
    # A Literal's (ast imports this module): a precision the grammar reads back.
    return precision is None or (
        getattr(precision, "type", None) == "INT"
        and type(getattr(precision, "value", None)) is int
        and 0 <= precision.value <= MAX_PRECISION
    )
