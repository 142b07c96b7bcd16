"""CREATE [UNIQUE] INDEX and DROP INDEX.

Index names are the database's: two tables cannot have indexes of one name. An index is part
of its table's definition (the canonical CREATE TABLE lists it), is logged as the DDL that
made it, and holds no data of its own on disk: recovery builds it from the rows. Making or
dropping one changes no answer, so it moves no revision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Right
from refimpl.engine.storage import ddl
from refimpl.engine.storage.transaction import Transaction
from refimpl.errors import IndexExists, UniqueViolation, UnknownIndex
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def _holder(txn: Transaction, index: str) -> str | None:
    """The table holding an index of this name (any case), or None."""
    lowered = index.lower()
    for name in txn.table_names():
        if any(i.name.lower() == lowered for i in txn.table(name).schema.indexes):
            return name
    return None


def _create_index(
    context: StatementContext, statement: ast.CreateIndex, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)
    wanted = statement.index

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        holder = _holder(txn, wanted.name)
        if holder is not None:
            if statement.if_not_exists:
                return message_result(text, f"index '{wanted.name}' already exists")
            raise IndexExists(wanted.name, holder)
        work.seal(txn.entries)
        table = work.make_private()
        name = table.schema.name
        columns = tuple(table.schema.columns[table.schema.position(c)].name for c in wanted.columns)
        index = ast.IndexDef(wanted.name, columns, wanted.unique)
        replacement = ddl.create_index(table, index)
        if index.unique:
            clash = replacement.secondary[index.name.lower()].first_duplicate()
            if clash is not None:
                raise UniqueViolation(name, f"index '{index.name}'", clash)
        work.working = replacement
        txn.ddl(name, ddl.canonical_sql(ast.CreateIndex(name, index)), touched=set())
        return message_result(text, f"index '{index.name}' created on table '{name}'")

    return context.write(run)


def _drop_index(
    context: StatementContext, statement: ast.DropIndex, text: str, params: Sequence[Any]
) -> Result:
    context.authorize(Right.ADMIN)

    def run(txn: Transaction) -> Result:
        holder = _holder(txn, statement.name)
        if holder is None:
            if statement.if_exists:
                return message_result(text, f"index '{statement.name}' does not exist")
            raise UnknownIndex(statement.name)
        work = txn.table(holder)
        work.seal(txn.entries)
        table = work.make_private()
        name = next(
            i.name for i in table.schema.indexes if i.name.lower() == statement.name.lower()
        )
        work.working = ddl.drop_index(table, name)
        logged = ast.DropIndex(name, table=table.schema.name)
        txn.ddl(table.schema.name, ddl.canonical_sql(logged), touched=set())
        return message_result(text, f"index '{name}' dropped from table '{table.schema.name}'")

    return context.write(run)


HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CreateIndex: _create_index,
    ast.DropIndex: _drop_index,
}
