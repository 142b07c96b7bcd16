"""The views of a database as PostgreSQL's catalog shows them (`pg_class` rows of `relkind`
'v', their columns in `pg_attribute`, `pg_get_viewdef`).

A view is shown to a caller who may read it, with the right a read of it needs: READ on the
view and on every table its query reads. Its columns, and their types, are those a read of
it answers: `pg_catalog` is handed a way to know them (`ViewColumns`, a shape run of the
view's query with the caller's rights, over no rows: see `queries.QueryRunner`), which
raises where a read would. A view whose read would fail, for want of a right or because a
table it reads was dropped, has no row: a caller learns nothing of what it may not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from refimpl.engine.result import Column
from refimpl.errors import (
    Forbidden,
    SqlError,
    StatementCancelled,
    StatementTimeout,
    Unauthorized,
)
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached
from refimpl.sql.printer import to_sql

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# The columns of the view named (in lower case) as the caller would read them; raises what a
# read of the view would raise (Forbidden, UnknownTable, ...).
ViewColumns = Callable[[str], list[Column]]


@dataclass(frozen=True, slots=True)
class ViewRelation:
    """One view the caller may read: its name as its CREATE VIEW spells it, the columns a
    read answers, and its query."""

    name: str
    columns: tuple[Column, ...]
    query: ast.Query

    def definition(self) -> str:
        """`pg_get_viewdef(oid)`: the query's canonical text (this engine's, as `SHOW CREATE`
        writes SQL), after a space and ending in `;`, as PostgreSQL writes a definition."""
        return f" {to_sql(self.query)};"


def readable_views(
    context: StatementContext,
    columns_of: ViewColumns | None,
    wanted: Callable[[str], bool] | None = None,
) -> list[ViewRelation]:
    """The views the caller may read, by name; only those whose lower-case name `wanted`
    takes, if given. None for `columns_of`: no views (a shape run, whose rows nobody reads)."""
    if columns_of is None:
        return []
    found = []
    for name, text in sorted(context.database.views.items()):
        if (wanted is not None and not wanted(name)) or not context.can_read(name):
            continue
        try:
            columns = columns_of(name)
        except (StatementTimeout, StatementCancelled):
            raise  # the statement's end, not the view's
        except (SqlError, Forbidden, Unauthorized):
            continue
        statement = parse_cached(text).statements[0]
        assert isinstance(statement, ast.CreateView)
        found.append(ViewRelation(statement.name, tuple(columns), statement.query))
    return found
