"""A text's statements, cut where the project's parser cuts them, with where each starts;
and what running one answers (`StatementAnswer`) or raises (`ShellError`).

The parser is the server's own, so quotes, comments and `$$` or `BEGIN ... END` bodies end
a statement exactly where the server would end it; a text that does not parse is one
`ShellError` with the position of its fault, and nothing of it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from refimpl.errors import KdbError
from refimpl.sql import ast
from refimpl.sql.parser import parse

# What `\c` answers while a transaction is open, whichever the backend.
OPEN_TRANSACTION = "a transaction is open; COMMIT or ROLLBACK it first"


@dataclass(frozen=True, slots=True)
class StatementAnswer:
    """What one statement answered: its columns and rows, or its message."""

    columns: tuple[tuple[str, str], ...] | None  # (name, type) of a query's columns
    rows: tuple[tuple[Any, ...], ...]
    message: str
    count: int


class ShellError(Exception):
    """A statement failed; `line` and `column` (1-based) point into the text when known;
    `statement` is which statement of a text of several failed (1-based), when told."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        statement: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.statement = statement


class Kind(Enum):
    """What a statement does to a transaction."""

    OTHER = "other"
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"


_KINDS: dict[type, Kind] = {
    ast.Begin: Kind.BEGIN,
    ast.Commit: Kind.COMMIT,
    ast.Rollback: Kind.ROLLBACK,
}


@dataclass(frozen=True, slots=True)
class Piece:
    """One statement: its text (no `;`), where it starts in the whole text (1-based line and
    column), and its kind."""

    text: str
    line: int
    column: int
    kind: Kind = Kind.OTHER

    def place(self, error: ShellError) -> ShellError:
        """`error`, raised by this statement alone, with its position in the whole text."""
        if error.line is None:
            return error
        column = error.column
        if error.line == 1 and column is not None:
            column += self.column - 1
        return ShellError(error.message, self.line + error.line - 1, column)

    def run_on(self, run: Callable[[str], StatementAnswer]) -> StatementAnswer:
        """`run(self.text)`, its ShellError placed in the whole text (`place`)."""
        try:
            return run(self.text)
        except ShellError as error:
            raise self.place(error) from None


def split(text: str) -> list[Piece]:
    """The statements of `text` in order (none for a text of comments and `;` alone)."""
    try:
        script = parse(text)
    except KdbError as error:
        position = error.details().get("position")
        if isinstance(position, dict):
            raise ShellError(error.message, position.get("line"), position.get("column")) from None
        raise ShellError(error.message) from None
    pieces = []
    cursor = 0
    for statement, source in zip(script.statements, script.sources, strict=True):
        # Each source is the text's own slice, trimmed: found from where the last one ended.
        start = text.find(source, cursor)
        cursor = start + len(source)
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        pieces.append(Piece(source, line, column, _KINDS.get(type(statement), Kind.OTHER)))
    return pieces
