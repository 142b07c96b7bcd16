"""CREATE VIEW and DROP VIEW.

A view is a named query of the database, kept as its canonical text in the database's state
(logged as a database change, kept by checkpoints, so recovery rebuilds it). Making or dropping
one needs ADMIN, as a table does; CREATE VIEW runs the query once with the creator's rights,
so a view that cannot be read (an unknown table or column, a type error) is refused then.
Reading a view runs its query with the reader's rights (see `queries.QueryRunner`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Right
from refimpl.engine.statements.queries import QueryRunner
from refimpl.engine.storage import ddl
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import SqlError, TableExists, UnknownTable
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def _create_view(
    context: StatementContext, statement: ast.CreateView, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)
    name = statement.name
    if any(isinstance(node, ast.Param) for node in ast.walk(statement.query)):
        raise SqlError("a view takes no ? parameters; write the values in its query")

    def run(txn: Transaction) -> Result:
        if name.lower() in context.database.views:
            if statement.if_not_exists:
                return message_result(text, f"view '{name}' already exists")
            raise TableExists(name)
        if txn.has_table(name):
            raise TableExists(name)
        QueryRunner(context, (), context.transaction_time()).run_locked(statement.query)
        txn.database_changes.append(ddl.canonical_sql(ast.CreateView(name, statement.query)))
        return message_result(text, f"view '{name}' created")

    return context.write(run)


def _drop_view(
    context: StatementContext, statement: ast.DropView, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)
    name = statement.name

    def run(txn: Transaction) -> Result:
        if name.lower() not in context.database.views:
            if txn.has_table(name):
                raise SqlError(f"'{name}' is a table, not a view; drop it with DROP TABLE")
            if statement.if_exists:
                return message_result(text, f"view '{name}' does not exist")
            raise UnknownTable(name)
        txn.database_changes.append(ddl.canonical_sql(ast.DropView(name)))
        # As DROP TABLE: a new view or table of that name inherits no grant or revoke.
        database = context.database.name
        txn.after_commit.append(lambda: context.access.forget_table(database, name))
        return message_result(text, f"view '{name}' dropped")

    return context.write(run)


HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CreateView: _create_view,
    ast.DropView: _drop_view,
}
