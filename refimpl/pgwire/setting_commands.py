"""The session commands a connection answers itself (spec: pgwire): SET, SHOW, RESET,
DISCARD ALL and DEALLOCATE, on its settings and its prepared statements and portals."""

from __future__ import annotations

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.errors import InsideTransactionBlock, UnknownPreparedStatement
from refimpl.pgwire import messages as m
from refimpl.pgwire.portals import Portal, Prepared
from refimpl.pgwire.session_settings import SessionSettings, SettingCommand

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
    in_transaction: bool,
) -> tuple[Result, list[m.ServerMessage]]:
    """Run a SET, SHOW, RESET, DISCARD ALL or DEALLOCATE on a connection's `settings` and
    its `prepared` statements and `portals`: its result and the ParameterStatus messages
    of the settings it changed."""
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
    elif command.verb == "RESET":
        assert command.name is not None
        changed = settings.reset(command.name)
    else:
        assert command.name is not None and command.value is not None
        changed = settings.set(command.name, command.value)
    reported: list[m.ServerMessage] = [
        m.ParameterStatus(name, settings.values[name]) for name in changed
    ]
    return message_result(command.verb, command.verb), reported
