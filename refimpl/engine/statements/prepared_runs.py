"""A statement prepared once and run many times (a protocol's prepared statement).

`Session.execute(text, params)` reads its text at every run: its size, its parse (a cache
lookup), its count of placeholders and each statement's handler. A `PreparedRun` has all of
that done once; `Session.run_prepared` then goes from the parameters to the handler. Both
find a SELECT's handler by its parsed statement object (`ParsedHandlers`, one per
instance): a SELECT of one table is judged once (no subquery, a table source) and keeps
its point plan, which the plan cache would find only by hashing the whole statement. What
is never done once for all: the rights (each handler checks them at each run), the
admission of costly statements, the statement timeout, and the commit's durability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.point_read import PointPlan, point_plan, read_without_lock
from refimpl.engine.query.subqueries import has_subquery
from refimpl.engine.result import Result, query_result
from refimpl.engine.rights import READ
from refimpl.engine.statements import executor, pg_catalog
from refimpl.engine.statements.prepared_insert import PreparedInsert, runs_one_row
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """One statement's text, read once (`Session.prepare`).

    `sql` is the text as the client sent it (the admission judges its cost by its `shape`),
    `source` the statement's own text (what its Result names), `param_count` the `?`s it
    takes, `handler` what runs it.
    """

    sql: str
    source: str
    statement: ast.Statement
    param_count: int
    shape: int
    handler: executor.Handler


def prepared_handler(statement: ast.Statement) -> executor.Handler:
    """The handler `executor.execute` runs `statement` with, chosen once: it answers what
    `execute` answers. A SELECT of one table gets a `PreparedTableSelect` of its own (its
    bound `__call__`: a bound method is called without the look-up and the tuple of
    arguments an instance's call makes, every run). NotAllowed, as `execute` raises it, for
    a statement no handler runs. A one-row INSERT gets a `PreparedInsert` of its own."""
    if runs_one_row(statement):
        assert isinstance(statement, ast.Insert)
        return PreparedInsert(statement)
    if (
        type(statement) is ast.Select
        and isinstance(statement.source, ast.TableSource)
        and not has_subquery(statement)
    ):
        return PreparedTableSelect(statement.source).__call__
    return executor.handler_of(statement)


class ParsedHandlers:
    """The handlers of parsed SELECTs and one-row INSERTs, by the statement object, for one
    instance: a text parsed once (the parse cache's, a template's shared parse: every /exec
    request of one shape) finds its handler and point plan (or row shape) here without
    hashing its statement. Other statements' handlers are one dictionary lookup away (and a
    long INSERT's tree may be large).
    Threads may share it: an entry is one tuple, added or the whole map emptied."""

    KEPT = 2048  # entries kept; the map is emptied when it holds this many

    __slots__ = ("_by_statement",)

    def __init__(self) -> None:
        # id(statement) -> (statement, handler): the statement kept, so its id stays its own.
        self._by_statement: dict[int, tuple[ast.Statement, executor.Handler]] = {}

    def of(self, statement: ast.Statement) -> executor.Handler:
        """`prepared_handler(statement)`, made once per SELECT or one-row INSERT object and
        shared by every thread that runs it; NotAllowed as `executor.execute` raises it."""
        # Looked up first: only SELECTs and one-row INSERTs are kept, and an INSERT's
        # `runs_one_row` looks at each of its values (90 Python steps an /exec INSERT).
        kept = self._by_statement.get(id(statement))
        if kept is not None and kept[0] is statement:
            return kept[1]
        if type(statement) is not ast.Select and not runs_one_row(statement):
            return executor.handler_of(statement)
        handler = prepared_handler(statement)
        if len(self._by_statement) >= self.KEPT:
            self._by_statement.clear()
        self._by_statement[id(statement)] = (statement, handler)
        return handler


class PreparedTableSelect:
    """`executor.execute` of one SELECT of one table without subqueries, run again and
    again: its shape is not examined at each run, and its point plan is kept here for the
    schema object it was made for, as the database's plan cache keeps it (a schema change
    makes a new schema object, and so a new plan), without hashing the statement to find it.
    A run outside a transaction that reads one row by the table's key goes from the right's
    check to `read_without_lock` and its Result directly; any other run is `table_rows`'.
    Made for one statement's source, and run only for that statement (`ParsedHandlers`).
    Threads may share one: what it keeps is one tuple, replaced whole."""

    __slots__ = ("_point", "_name", "_catalog")

    def __init__(self, source: ast.TableSource) -> None:
        # (schema, its point plan or None): one tuple, replaced whole.
        self._point: tuple[TableSchema, PointPlan | None] | None = None
        self._name = source.name.lower()
        # A catalog relation's name: a table of that name stands in for it (`is_relation`).
        self._catalog = self._name in pg_catalog.RELATIONS

    def __call__(
        self, context: StatementContext, statement: ast.Select, text: str, params: Sequence[Any]
    ) -> Result:
        source = statement.source
        assert isinstance(source, ast.TableSource)
        database = context.database
        name = self._name
        # `executor.names_a_table`, its lower-cased name and catalog look-up made once.
        if name in database.views or (self._catalog and name not in database.tables):
            return executor.execute(context, statement, text, params)  # a view, say
        if context.transaction is None:
            # `table_rows`' first steps, in its order: the right, then the point read.
            context.authorize(READ, source.name)
            read = read_without_lock(database, statement, name, self._points, params)
            if read is not None:
                columns, rows = read
                return Result(text, columns, rows, None, len(rows))
        output = executor.table_rows(context, statement, source, params, True, self._points)
        return query_result(text, output.columns, output.rows)

    def _points(
        self, statement: ast.Select, schema: TableSchema, plans: PlanCache
    ) -> PointPlan | None:
        kept = self._point
        if kept is not None and kept[0] is schema:
            return kept[1]
        point = point_plan(statement, schema, plans)
        self._point = (schema, point)
        return point
