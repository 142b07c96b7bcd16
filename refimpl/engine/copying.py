"""COPY as a protocol layer calls it: the statement recognised, rows in from a stream, rows
out as chunks of text. A protocol layer hands the bytes over; it parses no data itself.
"""

from __future__ import annotations

from typing import IO

from refimpl.engine.result import Result
from refimpl.engine.session import Session
from refimpl.engine.statements import executor
from refimpl.engine.statements.copy import CopyOutput, copy_output
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

__all__ = ["CopyOutput", "copy_in", "copy_out", "copy_statement"]


def copy_statement(sql: str) -> ast.CopyFrom | ast.CopyTo | None:
    """The COPY that `sql` is when it is one COPY FROM STDIN or COPY TO STDOUT alone, else
    None (run it with `Session.execute`). Raises SqlSyntaxError for bad SQL."""
    statements = parse_cached(sql).statements
    if len(statements) != 1:
        return None
    statement = statements[0]
    if isinstance(statement, ast.CopyFrom) and statement.file is None:
        return statement
    return statement if isinstance(statement, ast.CopyTo) else None


def copy_in(session: Session, sql: str, data: IO[bytes]) -> Result:
    """Run `COPY ... FROM STDIN` with `data` as its rows: one transaction, all or nothing."""
    statement = copy_statement(sql)
    if not isinstance(statement, ast.CopyFrom):
        raise ValueError("copy_in takes one COPY ... FROM STDIN")
    return executor.copy_in(session, statement, sql, data)


def copy_out(session: Session, sql: str) -> CopyOutput:
    """Run `COPY ... TO STDOUT`; the answer's `chunks()` are its text."""
    statement = copy_statement(sql)
    if not isinstance(statement, ast.CopyTo):
        raise ValueError("copy_out takes one COPY ... TO STDOUT")
    return copy_output(session, statement)
