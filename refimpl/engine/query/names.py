"""One spelling for each column reference, so that expressions compare as PostgreSQL's do.

`t.col2`, `col2` and `COL2` name one column of `FROM tab AS t`; grouping matches the select
list, HAVING and ORDER BY against GROUP BY by the expressions' trees, so every reference is
first written as the column it resolves to (its own name, its table's alias when it has
one). A reference the scope cannot resolve (an outer query's column, a mistake) is left as
written, for the compiler to resolve or to report; a subquery's own names are its own and
are left alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from refimpl.engine.query.compiled import Scope
from refimpl.errors import SqlError
from refimpl.sql import ast


def canonical(expr: ast.Expr, scope: Scope) -> ast.Expr:
    """`expr` with each column reference `scope` resolves spelled as the column it names."""
    result = _rewrite(expr, scope)
    assert isinstance(result, ast.Expr)
    return result


def _rewrite(node: Any, scope: Scope) -> Any:
    if isinstance(node, ast.ColumnRef):
        try:
            column = scope.resolve(node)
        except SqlError:
            return node
        return ast.ColumnRef(column.name, column.qualifier or None)
    if isinstance(node, tuple):
        items = tuple(_rewrite(item, scope) for item in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    # A query inside the expression resolves its own names (and runs in its own scope).
    if isinstance(node, ast.Statement) or not dataclasses.is_dataclass(node):
        return node
    changes = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        rewritten = _rewrite(value, scope)
        if rewritten is not value:
            changes[field.name] = rewritten
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]
