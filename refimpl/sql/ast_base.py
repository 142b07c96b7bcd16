"""The base of the expression objects and `walk` (part of `refimpl.sql.ast`, which re-exports
them: use them as `ast.Expr`, `ast.walk`), apart so that the modules of `ast`'s node families
can derive from it."""

from __future__ import annotations

from collections.abc import Iterator


class Expr:
    """Base of every expression node."""

    __slots__ = ()


def walk(node: object) -> Iterator[object]:
    """Every node of a tree (statement, query, expression), `node` included, in no set order.

    With a stack of its own: safe on trees as deep as the parser allows.
    """
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, tuple):
            todo.extend(item)
            continue
        yield item
        if hasattr(item, "__dataclass_fields__"):
            todo.extend(getattr(item, name) for name in item.__dataclass_fields__)
