"""The session commands a connection answers itself (spec: pgwire): SET, SHOW, RESET,
DISCARD ALL and DEALLOCATE, on its settings and its prepared statements and portals."""

from __future__ import annotations

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.session import Session
from refimpl.errors import InsideTransactionBlock, UnknownPreparedStatement
from refimpl.pgwire import messages as m
from refimpl.pgwire.portals import Portal, Prepared
from refimpl.pgwire.session_settings import SessionSettings, SettingCommand
from refimpl.sql.ast_session import ReleaseSavepoint, RollbackTo, Savepoint

# The CommandComplete tag of each command (DEALLOCATE of every statement: DEALLOCATE ALL).
SETTING_TAGS = {
    "SET": "SET",
    "SHOW": "SHOW",
    "RESET": "RESET",
    "DISCARD": "DISCARD ALL",
    "DEALLOCATE": "DEALLOCATE",
}


def run_setting(
    settings: SessionSettings,
    command: SettingCommand,
    prepared: dict[str, Prepared],
    portals: dict[str, Portal],
    session: Session,
) -> tuple[Result, list[m.ServerMessage]]:
    """Run a SET, SHOW, RESET, DISCARD ALL or DEALLOCATE on a connection's `settings` and
    its `prepared` statements and `portals`: its result and the ParameterStatus messages
    of the settings it changed. A change inside the `session`'s transaction is kept or
    undone as it ends; `lock_timeout` goes to the session."""
    in_transaction = session.transaction is not None
    if command.verb == "SHOW":
        assert command.name is not None
        if command.name.lower() == "all":
            rows = [(name, value) for name, value in sorted(settings.values.items())]
            columns = [Column("name", "STRING"), Column("setting", "STRING")]
            return query_result("SHOW ALL", columns, rows), []
        value = settings.show(command.name)
        name = settings.canonical(command.name).lower()
        return query_result("SHOW", [Column(name, "STRING")], [(value,)]), []
    if command.verb == "DEALLOCATE":
        if command.name is None:
            prepared.clear()
        elif prepared.pop(command.name, None) is None:
            raise UnknownPreparedStatement(f'prepared statement "{command.name}" does not exist')
        return message_result("DEALLOCATE", "DEALLOCATE"), []
    if command.verb == "DISCARD":
        if in_transaction:
            raise InsideTransactionBlock("DISCARD ALL cannot run inside a transaction block")
        prepared.clear()
        portals.clear()
        changed = settings.reset("all")
    else:
        if in_transaction:
            _begin(settings, session)
        if command.verb == "RESET":
            assert command.name is not None
            changed = settings.reset(command.name)
        else:
            assert command.name is not None and command.value is not None
            changed = settings.set(command.name, command.value, command.local)
    session.lock_timeout = settings.seconds("lock_timeout")
    reported: list[m.ServerMessage] = [
        m.ParameterStatus(name, settings.values[name]) for name in changed
    ]
    return message_result(command.verb, command.verb), reported


def after_savepoint(settings: SessionSettings, session: Session, statement: object) -> None:
    """After a statement that ran in a transaction: a SAVEPOINT, RELEASE or ROLLBACK TO
    marks, forgets or gives back the settings as PostgreSQL does; any other, nothing."""
    if isinstance(statement, Savepoint):
        _begin(settings, session)
        settings.savepoint(statement.name)
    elif isinstance(statement, ReleaseSavepoint):
        settings.release(statement.name)
    elif isinstance(statement, RollbackTo):
        settings.rollback_to(statement.name)
        session.lock_timeout = settings.seconds("lock_timeout")


def _begin(settings: SessionSettings, session: Session) -> None:
    """Settings are changed or marked in the session's transaction: its end is told."""
    if settings.begin_transaction():
        session.transaction_ends.append(lambda committed: _ended(settings, session, committed))


def _ended(settings: SessionSettings, session: Session, committed: bool) -> None:
    """The transaction a SET ran in ended: its settings are kept or undone, the session's
    lock timeout with them (`reported_after_end` tells the client)."""
    settings.end_transaction(committed)
    session.lock_timeout = settings.seconds("lock_timeout")


def reported_after_end(settings: SessionSettings) -> list[m.ServerMessage]:
    """The ParameterStatus of the reported settings the end or the failure of a transaction
    changed (a SET of application_name rolled back, say), each told once."""
    if not settings.unreported:
        return []
    names, settings.unreported = settings.unreported, []
    return [m.ParameterStatus(name, settings.values[name]) for name in names]
