"""Revisions in SQL: the kdb_rev() function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.query.session_functions import SessionOf
from refimpl.engine.rights import READ
from refimpl.errors import SqlError, TypeMismatch
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.tracking.revisions import Revisions


def kdb_rev(call: ast.FuncCall, scope: Scope, session: SessionOf[StatementContext]) -> Compiled:
    """kdb_rev('t') is the table's revision, kdb_rev('t', 'v') the value's; NULL in, NULL out.
    The right to read the table, and that it exists, are checked at every call, for the
    session the call runs for (`session`): a kept plan holds neither."""
    if len(call.args) not in (1, 2):
        raise SqlError("kdb_rev() takes a table name and optionally a value")
    args = [compile_expression(a, scope) for a in call.args]
    if args[0].type not in ("STRING", "SYMBOL", "NULL"):
        raise TypeMismatch(f"kdb_rev() takes the table's name as text, not {args[0].type}")

    def revisions_of(name: str) -> Revisions:
        context = session()
        # The right first: a caller who may not read it learns nothing of the table.
        context.authorize(READ, name)
        database = context.database
        database.committed_table(name)  # UnknownTable if there is none
        return database.revisions

    name_fn = args[0].fn
    if len(args) == 1:

        def table_rev(row: Sequence[Any]) -> Any:
            name = name_fn(row)
            return None if name is None else revisions_of(name).table_rev(name)

        return Compiled(table_rev, "STRING")
    value_fn = args[1].fn

    def value_rev(row: Sequence[Any]) -> Any:
        name, value = name_fn(row), value_fn(row)
        if name is None or value is None:
            return None
        return revisions_of(name).value_revs(name, [value])[value]

    return Compiled(value_rev, "STRING")
