"""Revisions in SQL: the kdb_rev() function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.rights import Right
from refimpl.errors import SqlError, TypeMismatch
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import ScalarFunction, StatementContext


def kdb_rev_builder(context: StatementContext) -> ScalarFunction:
    """kdb_rev('t') is the table's revision, kdb_rev('t', 'v') the value's; NULL in, NULL out."""

    def build(call: ast.FuncCall, scope: Scope) -> Compiled:
        if len(call.args) not in (1, 2):
            raise SqlError("kdb_rev() takes a table name and optionally a value")
        args = [compile_expression(a, scope) for a in call.args]
        if args[0].type not in ("STRING", "SYMBOL", "NULL"):
            raise TypeMismatch(f"kdb_rev() takes the table's name as text, not {args[0].type}")
        database = context.database
        checked: set[str] = set()

        def table_of(name: str) -> str:
            if name not in checked:
                # The right first: a caller who may not read it learns nothing of the table.
                context.authorize(Right.READ, name)
                database.committed_table(name)  # UnknownTable if there is none
                checked.add(name)
            return name

        name_fn = args[0].fn
        revisions = database.revisions
        if len(args) == 1:

            def table_rev(row: Sequence[Any]) -> Any:
                name = name_fn(row)
                return None if name is None else revisions.table_rev(table_of(name))

            return Compiled(table_rev, "STRING")
        value_fn = args[1].fn

        def value_rev(row: Sequence[Any]) -> Any:
            name, value = name_fn(row), value_fn(row)
            if name is None or value is None:
                return None
            return revisions.value_revs(table_of(name), [value])[value]

        return Compiled(value_rev, "STRING")

    return build
