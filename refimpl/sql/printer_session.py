"""Canonical SQL text of transaction modes, savepoints and cursors (`printer.to_sql` uses
these; it hands in its own printers of names and queries, which this module cannot import)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refimpl.sql import ast_session as s

Printer = Callable[[Any], str]


def session_printers(name: Printer, query: Printer) -> dict[type, Printer]:
    """The printers of this module's statements, by node type."""

    def declare(n: s.DeclareCursor) -> str:
        binary = " BINARY" if n.binary else ""
        scroll = " SCROLL" if n.scroll else ""
        hold = " WITH HOLD" if n.hold else ""
        return f"DECLARE {name(n.name)}{binary}{scroll} CURSOR{hold} FOR {query(n.query)}"

    def fetch(n: s.Fetch) -> str:
        verb = "MOVE" if n.move else "FETCH"
        count = "ALL" if n.count is None else str(n.count)
        return f"{verb} {n.direction} {count} FROM {name(n.cursor)}"

    return {
        s.Savepoint: lambda n: f"SAVEPOINT {name(n.name)}",
        s.ReleaseSavepoint: lambda n: f"RELEASE SAVEPOINT {name(n.name)}",
        s.RollbackTo: lambda n: f"ROLLBACK TO SAVEPOINT {name(n.name)}",
        s.DeclareCursor: declare,
        s.Fetch: fetch,
        s.CloseCursor: lambda n: "CLOSE ALL" if n.name is None else f"CLOSE {name(n.name)}",
    }


def modes_text(modes: s.TransactionModes) -> str:
    """BEGIN's modes after a space, or nothing when they are the defaults."""
    parts = []
    if modes.isolation is not None:
        parts.append(f"ISOLATION LEVEL {modes.isolation.upper()}")
    if modes.read_only:
        parts.append("READ ONLY")
    if modes.deferrable:
        parts.append("DEFERRABLE")
    return " " + ", ".join(parts) if parts else ""
