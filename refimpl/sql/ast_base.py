"""The base of the expression objects and `walk` (part of `refimpl.sql.ast`, which re-exports
them: use them as `ast.Expr`, `ast.walk`), apart so that the modules of `ast`'s node families
can derive from it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Expr:
    """Base of every expression node."""

    __slots__ = ()


def walk(node: object, opaque: tuple[type, ...] = ()) -> Iterator[object]:
    """Every node of a tree (statement, query, expression), `node` included, in no set order.
    A node of a type in `opaque` is yielded but not looked into (a join's planning passes
    the subquery nodes: what is inside them is another query's).

    With a stack of its own: safe on trees as deep as the parser allows.
    """
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, tuple):
            todo.extend(item)
            continue
        yield item
        if hasattr(item, "__dataclass_fields__") and not isinstance(item, opaque):
            todo.extend(getattr(item, name) for name in item.__dataclass_fields__)


def outermost(expr: object, kind: type[T], accept: Callable[[T], bool] | None = None) -> list[T]:
    """The nodes of type `kind` in an expression that `accept` takes (all, without it),
    outermost first: none inside one found, nor inside a subquery (a node's `query` field)."""
    found: list[T] = []
    todo: list[object] = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, tuple):
            todo.extend(node)
        elif isinstance(node, kind) and (accept is None or accept(node)):
            found.append(node)
        elif isinstance(node, Expr) and hasattr(node, "__dataclass_fields__"):
            todo.extend(
                getattr(node, name) for name in node.__dataclass_fields__ if name != "query"
            )
    return found
