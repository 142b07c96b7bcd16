"""A simple Query of several statements, run as PostgreSQL runs it: one implicit
transaction (`Session.begin_text`).

PostgreSQL makes the statements of one Query message one transaction, unless they hold
their own transaction control: all of them commit after the last, or none does when one
fails. A BEGIN among them turns that transaction into a block, the statements before it
in it, which stays open after the message; a COMMIT or ROLLBACK among them ends it (with
a warning: there was no block) and the next statement begins another; a SAVEPOINT, or a
statement that cannot run inside a transaction, is refused there.
"""

from __future__ import annotations

from typing import Protocol

from refimpl.engine.session import Session
from refimpl.errors import KdbError
from refimpl.pgwire import messages as m
from refimpl.pgwire import sqlstate
from refimpl.pgwire.notifications import Inbox, pg_notify_call
from refimpl.pgwire.portals import Plan
from refimpl.pgwire.sqltext import Piece

# PostgreSQL's warning when a COMMIT or ROLLBACK ends the implicit transaction.
NO_TRANSACTION = m.ErrorResponse(
    "25P01", "there is no transaction in progress", "WARNING", notice=True
)


class Statements(Protocol):
    """The connection that answers the statements (`Conversation`)."""

    session: Session
    inbox: Inbox
    failed: bool

    def plan(self, piece: Piece) -> Plan: ...

    def answer_statement(self, plan: Plan, out: list[m.ServerMessage]) -> None: ...

    def fail_transaction(self) -> None: ...


def run_as_one(
    conversation: Statements, pieces: list[Piece], text: str, out: list[m.ServerMessage]
) -> None:
    """Answer the statements of `text` (its `pieces`) into `out` as one implicit
    transaction, every one read before the first runs (a syntax error anywhere runs none);
    the first error ends them, answered after the implicit transaction is rolled back (a
    block stays open and failed)."""
    session = conversation.session
    piece = pieces[0]
    try:
        plans = []
        for piece in pieces:
            plans.append(conversation.plan(piece))
    except KdbError as error:
        conversation.fail_transaction()
        out.append(sqlstate.error_response(error, text, piece.offset))
        return
    session.begin_text()
    try:
        for plan in plans:
            piece = plan.piece
            # pg_notify's notification goes out at the commit, and a later error drops it:
            # that query begins the implicit transaction as a change does.
            statement = None if pg_notify_call(plan.statement) else plan.statement
            session.in_text(statement)
            if session.implicit and plan.kind in ("Commit", "Rollback"):
                out.append(NO_TRANSACTION)
            conversation.answer_statement(plan, out)
            if session.transaction is None:  # a COMMIT ended it
                conversation.inbox.committed()
        session.end_text(committed=True)
    except KdbError as error:
        conversation.fail_transaction()
        if session.implicit:
            conversation.inbox.rolled_back()  # its NOTIFYs go with it
        session.end_text(committed=False)
        conversation.failed = session.failed
        out.append(sqlstate.error_response(error, text, piece.offset))
    except BaseException:
        session.end_text(committed=False)
        raise
