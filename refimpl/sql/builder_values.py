"""Reductions of SQL's value functions, written without parentheses (`current_user`,
`CURRENT_TIMESTAMP(3)`): each becomes a call (`ast.FuncCall` of the keyword's lower-case
name), as PostgreSQL makes them calls of its functions. The words of a time of day or a
date (`current_date`, `current_time`, `localtime`) are refused: this engine has no DATE or
TIME type (spec/types-and-values.md), and refuses those types the same way (0A000)."""

from __future__ import annotations

from lark import Token, Transformer, v_args

from refimpl.errors import NotAllowed, UnknownFunction
from refimpl.sql import ast
from refimpl.sql.ast_calls import KEYWORD_ONLY, MAX_PRECISION
from refimpl.sql.builder_ddl import error_at

# The words of a type this engine lacks -> what to write instead.
_WITHOUT_TYPE = {
    "current_date": "date_trunc('day', CURRENT_TIMESTAMP), a TIMESTAMP at midnight UTC",
    "current_time": "CURRENT_TIMESTAMP, a TIMESTAMP",
    "localtime": "LOCALTIMESTAMP, a TIMESTAMP",
}
# Taken with empty parentheses too: `current_user()` as this engine took it before the bare
# word (texts kept since, such as a view's or a trigger's, hold it), `current_schema()` as
# PostgreSQL takes it.
_ALSO_CALLED = frozenset({"current_user", "current_schema"})


def refuse_keyword_call(name: str) -> None:
    """A call with parentheses of a name that is only a keyword (`user()`, `current_role()`,
    `"current_timestamp"()`): UnknownFunction, as PostgreSQL has no such function."""
    if name in KEYWORD_ONLY:
        raise UnknownFunction(
            f"function {name}() does not exist; {name.upper()} is written without parentheses"
        )


@v_args(inline=True)
class ValueFunctionBuilder(Transformer):
    """The grammar's `session_value`, `session_value_call`, `clock_value`, `user_value`."""

    def session_value(self, token: Token) -> ast.FuncCall:
        return ast.FuncCall(token.lower())

    def session_value_call(self, token: Token) -> ast.FuncCall:
        name = token.lower()
        if name not in _ALSO_CALLED:
            raise error_at(token, f"{name.upper()} is written without parentheses")
        return ast.FuncCall(name)

    def clock_value(self, token: Token, precision: Token | None) -> ast.FuncCall:
        name = token.lower()
        if name in _WITHOUT_TYPE:
            raise NotAllowed(
                f"{name.upper()} is not supported: this engine has no"
                f" {'DATE' if name == 'current_date' else 'TIME'} type; use {_WITHOUT_TYPE[name]}"
            )
        if precision is None:
            return ast.FuncCall(name)
        if not precision.isdigit():
            raise error_at(precision, f"the precision of {name.upper()} is a whole number")
        # More digits than microseconds keep is read as six, as PostgreSQL does (it warns).
        written = precision.lstrip("0") or "0"
        digits = MAX_PRECISION if len(written) > 1 else min(int(written), MAX_PRECISION)
        return ast.FuncCall(name, (ast.Literal(digits, "INT"),))

    def user_value(self) -> ast.FuncCall:
        return ast.FuncCall("user")
