"""Statement objects of savepoints, transaction modes and cursors (`refimpl.sql.ast`
re-exports `Fetch`, `RollbackTo` and `TransactionModes`, which other modules name there).

`ast` imports this module, so a cursor's query is typed as the `Statement` it is (one of
`ast.Query`'s kinds).
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.sql.ast_access import Statement


@dataclass(frozen=True, slots=True)
class TransactionModes:
    """`ISOLATION LEVEL ...`, `READ WRITE | READ ONLY`, `[NOT] DEFERRABLE` of BEGIN, START
    TRANSACTION: `isolation` in lower case with single spaces (None: not named)."""

    isolation: str | None = None
    read_only: bool = False
    deferrable: bool = False


@dataclass(frozen=True, slots=True)
class Savepoint(Statement):
    """`SAVEPOINT name`."""

    name: str


@dataclass(frozen=True, slots=True)
class ReleaseSavepoint(Statement):
    """`RELEASE [SAVEPOINT] name`."""

    name: str


@dataclass(frozen=True, slots=True)
class RollbackTo(Statement):
    """`ROLLBACK [TRANSACTION | WORK] TO [SAVEPOINT] name`."""

    name: str


@dataclass(frozen=True, slots=True)
class DeclareCursor(Statement):
    """`DECLARE name [BINARY] [ASENSITIVE | INSENSITIVE] [[NO] SCROLL] CURSOR [WITH[OUT]
    HOLD] FOR query`; `query` is an `ast.Query`."""

    name: str
    query: Statement
    binary: bool = False
    scroll: bool = False
    hold: bool = False


@dataclass(frozen=True, slots=True)
class Fetch(Statement):
    """`FETCH` (or `MOVE`, `move` true) of a cursor: `direction` is one of NEXT, PRIOR,
    FIRST, LAST, ABSOLUTE, RELATIVE, FORWARD, BACKWARD; `count` None is ALL (FORWARD or
    BACKWARD only), else the number of rows (ABSOLUTE, RELATIVE: the position)."""

    cursor: str
    direction: str = "FORWARD"
    count: int | None = 1
    move: bool = False


@dataclass(frozen=True, slots=True)
class CloseCursor(Statement):
    """`CLOSE name`, or `CLOSE ALL` (`name` None)."""

    name: str | None
