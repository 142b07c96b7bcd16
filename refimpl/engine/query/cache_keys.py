"""What the result cache keys a SELECT's answer by, and when an answer may be cached at all.

An answer is keyed by the table, the statement and its typed parameters, and is good while
the revision counter it was read under stands still: the table's, or the value's when the
WHERE pins the table's rev column to one value.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import Scope, ScopeColumn
from refimpl.engine.query.expressions import AGGREGATES, children
from refimpl.engine.query.functions import CLOCK_FUNCTIONS, FUNCTIONS
from refimpl.engine.query.select import column_constraints
from refimpl.engine.storage.schema import TableSchema
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

# Functions whose answer may change without a commit.
_VOLATILE = CLOCK_FUNCTIONS | {"kdb_rev"}
# Functions whose answer is the same for every caller: the engine's own scalar functions of
# their arguments alone, and the aggregates. Any other call (current_user(),
# has_table_privilege, a catalog function, a routine) may answer each session otherwise.
_SAME_FOR_EVERY_SESSION = frozenset(FUNCTIONS).union(AGGREGATES) - _VOLATILE


@functools.lru_cache(maxsize=1024)
def deterministic(statement: ast.Select) -> bool:
    """False when the answer may change without a commit (now(), CURRENT_TIMESTAMP,
    kdb_rev())."""
    nodes: list[ast.Expr] = [item.expr for item in statement.items]
    for clause in (statement.where, statement.having, statement.limit, statement.offset):
        if clause is not None:
            nodes.append(clause)
    nodes += list(statement.group_by) + [o.expr for o in statement.order_by]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.FuncCall) and node.name in _VOLATILE:
            return False
        nodes.extend(children(node))
    return True


@functools.lru_cache(maxsize=1024)
def shareable(statement: ast.Select) -> bool:
    """True when one answer serves every session: `deterministic`, and calling no function
    whose answer may depend on the caller (`SELECT current_user(), id FROM t` must answer
    user u with u and user v with v, and a WHERE over such a call filters per caller). What
    the result cache and live queries' shared answers require."""
    if not deterministic(statement):
        return False
    return all(
        node.name in _SAME_FOR_EVERY_SESSION
        for node in ast.walk(statement)
        if isinstance(node, ast.FuncCall)
    )


def pinned_value(schema: TableSchema, where: ast.Expr | None, params: Sequence[Any]) -> Any:
    """The value a WHERE fixes the table's rev column to, or None."""
    rev = schema.rev_column
    if rev is None or where is None:
        return None
    scope = Scope(
        columns=[ScopeColumn(i, c.type, c.name) for i, c in enumerate(schema.columns)],
        params=params,
    )
    for name, op, value in column_constraints(where, schema, scope):
        if op == "=" and name == rev.lower():
            return value
    return None


@functools.lru_cache(maxsize=4096)
def _pinned(schema: TableSchema, statement: ast.Select, typed: tuple[Any, ...]) -> Any:
    """pinned_value, remembered per statement (typed: the parameters with their types)."""
    return pinned_value(schema, statement.where, tuple(value for _, value in typed))


def cache_plan(
    database: Database, schema: TableSchema, statement: ast.Select, params: Sequence[Any]
) -> tuple[Any, int]:
    """(key, revision counter) to cache this SELECT under, or (None, 0) when it may not be."""
    if database.result_cache.max_bytes <= 0 or not shareable(statement):
        return None, 0
    try:
        # Each parameter with its type: 1, 1.0 and True are equal keys but other answers.
        key = (schema.name.lower(), statement, tuple((type(p), p) for p in params))
        hash(key)
    except TypeError:
        return None, 0
    value = _pinned(schema, statement, key[2])
    if value is not None:
        return key, database.revisions.value_n(schema.name, value)
    return key, database.revisions.table_n(schema.name)
