"""CREATE, ALTER and DROP PUBLICATION (the publications are kept by the instance's
`PublicationStore`, `refimpl.engine.statements.publication_store`).

A publication is a named set of a database's tables (or all of them, `FOR ALL TABLES`)
that a logical replication stream with the `pgoutput` plugin shows (spec: replication). It
belongs to the user who made it, and shows only tables that user may read when the stream
reads them. They are durable before the statement answers and not in a database's log, so a
transaction's ROLLBACK does not undo them (as other statements on users and rights).
Making, changing or dropping one needs ADMIN on the database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Right
from refimpl.engine.statements.publication_store import Publication, PublicationStore
from refimpl.errors import SqlError, UnknownTable
from refimpl.sql.ast_publications import AlterPublication, CreatePublication, DropPublication

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def _store(context: StatementContext) -> PublicationStore:
    return context.catalog.publications


def _tables(context: StatementContext, names: Sequence[str]) -> tuple[str, ...]:
    """The tables named, each checked to exist, in their own spelling."""
    found: list[str] = []
    for name in names:
        table = context.database.tables.get(name.lower())
        if table is None:
            raise UnknownTable(name)
        if table.schema.name.lower() not in {f.lower() for f in found}:
            found.append(table.schema.name)
    return tuple(found)


def _create(context: StatementContext, statement: CreatePublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    tables = () if statement.tables is None else _tables(context, statement.tables)
    publication = Publication(
        context.database.name,
        statement.name,
        context.principal.name or "",
        statement.tables is None,
        tables,
    )
    _store(context).put(publication, new=True)
    return message_result(text, f"publication '{statement.name}' created")


def _alter(context: StatementContext, statement: AlterPublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    store = _store(context)
    publication = store.get(context.database.name, statement.name)
    if publication.all_tables:
        raise SqlError(
            f'publication "{statement.name}" is defined as FOR ALL TABLES; tables cannot be'
            " added to or dropped from it"
        )
    named = _tables(context, statement.tables)
    lowered = {t.lower() for t in named}
    if statement.action == "ADD":
        tables = publication.tables + tuple(t for t in named if not publication.includes(t))
    elif statement.action == "DROP":
        absent = [t for t in named if not publication.includes(t)]
        if absent:
            raise SqlError(f'relation "{absent[0]}" is not part of the publication')
        tables = tuple(t for t in publication.tables if t.lower() not in lowered)
    else:
        tables = named
    store.put(replace(publication, tables=tables), new=False)
    return message_result(text, f"publication '{statement.name}' altered")


def _drop(context: StatementContext, statement: DropPublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    count = _store(context).drop(context.database.name, statement.names, statement.if_exists)
    return message_result(text, f"{count} publication(s) dropped", count)


HANDLERS: dict[type, Callable[..., Result]] = {
    CreatePublication: _create,
    AlterPublication: _alter,
    DropPublication: _drop,
}
