"""Statements parsed for tests that hand one to an engine function directly."""

from __future__ import annotations

from typing import TypeVar

from refimpl.sql import ast
from refimpl.sql.parser import parse

S = TypeVar("S", bound=ast.Statement)


def statement(sql: str, kind: type[S]) -> S:
    """The one statement of `sql`; the test fails if there are several or it is no `kind`."""
    (parsed,) = parse(sql).statements
    assert isinstance(parsed, kind), f"{sql!r} is a {type(parsed).__name__}, not a {kind.__name__}"
    return parsed
