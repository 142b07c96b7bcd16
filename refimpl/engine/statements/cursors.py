"""Savepoints and cursors: SAVEPOINT, RELEASE, ROLLBACK TO; DECLARE, FETCH, MOVE, CLOSE.

A cursor's query runs once, at DECLARE, and its rows are kept in the session: every FETCH
reads the answer as it was then, whatever commits meanwhile (PostgreSQL's snapshot), and a
cursor may move backwards as well as forwards. A cursor declared in a transaction closes at
its end, unless it is WITH HOLD and the transaction commits; WITH HOLD outside a
transaction keeps it until CLOSE or the session's end. Its rows count against the result
limit as a query's do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.result import Result, message_result, query_result
from refimpl.engine.statements.cursor_state import Cursor
from refimpl.engine.statements.queries import QueryRunner
from refimpl.errors import NoActiveTransaction, NotAllowed
from refimpl.sql import ast
from refimpl.sql import ast_session as s

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def _declare(
    context: StatementContext, statement: s.DeclareCursor, text: str, params: Sequence[Any]
) -> Result:
    cursors = context.cursors
    in_transaction = context.transaction is not None
    if not in_transaction and not statement.hold:
        raise NoActiveTransaction(
            "DECLARE CURSOR can only be used in transaction blocks; BEGIN first, or declare"
            " it WITH HOLD"
        )
    if statement.name.lower() in cursors.open:
        raise NotAllowed(f'cursor "{statement.name}" already exists; CLOSE it first')
    if statement.binary:
        raise NotAllowed(
            "DECLARE ... BINARY CURSOR is not supported; declare it without BINARY and ask for"
            " binary results in the protocol's Bind"
        )
    query = statement.query
    assert isinstance(query, ast.Select | ast.Values | ast.SetOperation | ast.WithQuery)
    output = QueryRunner(context, params, context.transaction_time()).run_locked(query)
    cursors.open[statement.name.lower()] = Cursor(
        statement.name, output.columns, list(output.rows), statement.hold, in_transaction
    )
    return message_result(text, f"cursor '{statement.name}' declared")


def _fetch(
    context: StatementContext, statement: s.Fetch, text: str, params: Sequence[Any]
) -> Result:
    cursor = context.cursors.get(statement.cursor)
    rows = cursor.fetch(statement.direction, statement.count)
    if statement.move:
        return message_result(text, f"{len(rows)} row(s) moved", len(rows))
    return query_result(text, cursor.columns, rows)


def _close(
    context: StatementContext, statement: s.CloseCursor, text: str, params: Sequence[Any]
) -> Result:
    if statement.name is None:
        context.cursors.close_all()
        return message_result(text, "every cursor closed")
    context.cursors.get(statement.name)
    del context.cursors.open[statement.name.lower()]
    return message_result(text, f"cursor '{statement.name}' closed")


def _savepoint(
    context: StatementContext, statement: s.Savepoint, text: str, params: Sequence[Any]
) -> Result:
    context.savepoint(statement.name)
    return message_result(text, f"savepoint '{statement.name}' made")


def _release(
    context: StatementContext, statement: s.ReleaseSavepoint, text: str, params: Sequence[Any]
) -> Result:
    context.release_savepoint(statement.name)
    return message_result(text, f"savepoint '{statement.name}' released")


def _rollback_to(
    context: StatementContext, statement: s.RollbackTo, text: str, params: Sequence[Any]
) -> Result:
    context.rollback_to(statement.name)
    return message_result(text, f"rolled back to savepoint '{statement.name}'")


HANDLERS: dict[type, Callable[..., Result]] = {
    s.DeclareCursor: _declare,
    s.Fetch: _fetch,
    s.CloseCursor: _close,
    s.Savepoint: _savepoint,
    s.ReleaseSavepoint: _release,
    s.RollbackTo: _rollback_to,
}
