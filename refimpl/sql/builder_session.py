"""Reductions of transaction modes, savepoints and cursors (part of the parse's `Builder`)."""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast_session as s
from refimpl.sql.ast_access import Statement

# A fetch direction as (direction, count); count None is ALL.
Direction = tuple[str, int | None]


@v_args(inline=True)
class SessionBuilder(Transformer):
    def begin(self, *parts: Any) -> Statement:
        from refimpl.sql import ast  # ast imports this module's statements

        modes = parts[-1] if parts and isinstance(parts[-1], s.TransactionModes) else None
        return ast.Begin(modes or s.TransactionModes())

    def transaction_modes(self, *modes: tuple[str, Any]) -> s.TransactionModes:
        isolation, read_only, deferrable = None, False, False
        for kind, value in modes:
            if kind == "isolation":
                isolation = value
            elif kind == "read_only":
                read_only = value
            elif value is not None:
                deferrable = value
        return s.TransactionModes(isolation, read_only, deferrable)

    def isolation_mode(self, level: str) -> tuple[str, Any]:
        return ("isolation", level)

    def read_write_mode(self) -> tuple[str, Any]:
        return ("read_only", False)

    def read_only_mode(self) -> tuple[str, Any]:
        return ("read_only", True)

    def deferrable_mode(self) -> tuple[str, Any]:
        return ("deferrable", True)

    def not_deferrable_mode(self) -> tuple[str, Any]:
        return ("deferrable", False)

    def serializable(self) -> str:
        return "serializable"

    def repeatable_read(self) -> str:
        return "repeatable read"

    def read_committed(self) -> str:
        return "read committed"

    def read_uncommitted(self) -> str:
        return "read uncommitted"

    def savepoint(self, name: str) -> s.Savepoint:
        return s.Savepoint(name)

    def release_savepoint(self, name: str) -> s.ReleaseSavepoint:
        return s.ReleaseSavepoint(name)

    def rollback_to(self, name: str) -> s.RollbackTo:
        return s.RollbackTo(name)

    # -- cursors -------------------------------------------------------------------------

    def declare_cursor(
        self,
        name: str,
        binary: bool | None,
        sensitivity: Any,
        scroll: bool | None,
        hold: bool | None,
        query: Statement,
    ) -> s.DeclareCursor:
        return s.DeclareCursor(name, query, bool(binary), bool(scroll), bool(hold))

    def cursor_binary(self) -> bool:
        return True

    def cursor_sensitivity(self) -> None:
        return None

    def no_scroll(self, token: Token) -> bool:
        return False

    def scroll(self) -> bool:
        return True

    def with_hold(self) -> bool:
        return True

    def without_hold(self) -> bool:
        return False

    def fetch_cursor(
        self, verb: str, direction: Direction | None, _from: Any, name: str
    ) -> s.Fetch:
        way, count = direction or ("FORWARD", 1)
        return s.Fetch(name, way, count, verb == "MOVE")

    def fetch_verb(self) -> str:
        return "FETCH"

    def move_verb(self) -> str:
        return "MOVE"

    def fetch_from(self) -> None:
        return None

    def fetch_next(self) -> Direction:
        return ("FORWARD", 1)

    def fetch_prior(self) -> Direction:
        return ("BACKWARD", 1)

    def fetch_first(self) -> Direction:
        return ("ABSOLUTE", 1)

    def fetch_last(self) -> Direction:
        return ("ABSOLUTE", -1)

    def fetch_absolute(self, count: int) -> Direction:
        return ("ABSOLUTE", count)

    def fetch_relative(self, count: int) -> Direction:
        return ("RELATIVE", count)

    def fetch_forward(self, count: int | None = None) -> Direction:
        return ("FORWARD", 1 if count is None else count)

    def fetch_forward_all(self) -> Direction:
        return ("FORWARD", None)

    def fetch_backward(self, count: int | None = None) -> Direction:
        return ("BACKWARD", 1 if count is None else count)

    def fetch_backward_all(self) -> Direction:
        return ("BACKWARD", None)

    def fetch_count(self, number: Token) -> int:
        return _whole(number)

    def fetch_negative(self, number: Token) -> int:
        return -_whole(number)

    def close_cursor(self, name: str | None = None) -> s.CloseCursor:
        return s.CloseCursor(name)


def _whole(number: Token) -> int:
    text = str(number)
    if not text.isdigit():
        raise SqlSyntaxError(f"a cursor's row count is a whole number, not {text}")
    return int(text)
