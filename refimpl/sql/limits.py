"""Limits of a statement's shape that the parser enforces (spec/sql.md, "Limits").

`check_depth` walks a tree with a stack of its own, so it can run before anything that
recurses over the tree (hashing, printing, compiling).
"""

from __future__ import annotations

import dataclasses
import functools

from refimpl.errors import StatementTooLarge
from refimpl.sql import ast

# Expressions nest at most this deep (`NOT NOT x` is 3, `a AND b AND c` is 3). Compiling an
# expression of depth d takes about 3 * d Python frames, and a server thread starts some 100
# frames deep, well within the default recursion limit of 1000.
MAX_DEPTH = 200
# Query parts that nest like expressions: a join of many tables is a left-deep chain, as are
# many UNIONs, and derived tables nest inside each other.
_NESTING = (ast.Expr, ast.JoinSource, ast.SubquerySource, ast.SetOperation, ast.WithQuery)


@functools.cache
def _node_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def check_depth(statement: object) -> None:
    """StatementTooLarge when an expression nests deeper than MAX_DEPTH.

    A walk with a stack of its own, so that it cannot run out of Python's: it runs before
    anything that recurses over the tree.
    """
    todo: list[tuple[object, int]] = [(statement, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, tuple):
            todo.extend((item, depth) for item in node)
            continue
        if not dataclasses.is_dataclass(node) or isinstance(node, type):
            continue
        if isinstance(node, _NESTING):
            depth += 1
            if depth > MAX_DEPTH:
                raise StatementTooLarge(
                    f"an expression or query is nested deeper than {MAX_DEPTH} levels; write"
                    " long chains of OR as IN (...), join fewer tables at once, or split the"
                    " statement"
                )
        todo.extend((getattr(node, name), depth) for name in _node_fields(type(node)))
