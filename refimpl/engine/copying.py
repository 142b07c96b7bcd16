"""COPY as a protocol layer calls it: the statement recognised, rows in from a stream, rows
out as chunks of text. A protocol layer hands the bytes over; it parses no data itself.

The rows of a COPY FROM STDIN are held until its one commit: with a memory limit
(`memory_mb`), its data counts against the limit as it is read, each line as its bytes and
a row's overhead (`memory_limit.ROW_OVERHEAD`), and the COPY is refused (MemoryFull,
nothing copied) as soon as that and the table data in use pass the limit.
"""

from __future__ import annotations

import io
from typing import IO, cast

from refimpl.engine.result import Result, message_result
from refimpl.engine.session import Session
from refimpl.engine.statements import copy as copy_statements
from refimpl.engine.statements import executor
from refimpl.engine.statements.copy import CopyOutput, copy_output
from refimpl.engine.storage.bulk import quick_switches
from refimpl.engine.storage.memory_limit import MB, ROW_OVERHEAD, MemoryBudget
from refimpl.errors import MemoryFull
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

__all__ = ["CopyOutput", "copy_in", "copy_is_binary", "copy_out", "copy_statement"]


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


def copy_is_binary(sql: str) -> bool:
    """Whether the COPY `sql` asks for the binary format (its data is then PostgreSQL's
    binary COPY data; the format's other checks come when it runs)."""
    statement = copy_statement(sql)
    options = statement.options if statement is not None else ()
    return any(o.name == "format" and o.value == "binary" for o in options)


def copy_in(session: Session, sql: str, data: IO[bytes]) -> Result:
    """Run `COPY ... FROM STDIN` with `data` as its rows: one transaction, all or nothing."""
    statement = copy_statement(sql)
    if not isinstance(statement, ast.CopyFrom):
        raise ValueError("copy_in takes one COPY ... FROM STDIN")
    memory = session.database.memory
    if memory.limit_bytes:
        data = cast(IO[bytes], _Counted(data, memory))
    if session.transaction is not None:
        return executor.copy_in(session, statement, sql, data)
    # Outside a transaction, the rows load as an import's do: prepared with no lock held,
    # installed in a short step, so that other writers' commits go on meanwhile; read and
    # loaded with the short switch interval, so that threads woken meanwhile get the
    # interpreter lock sooner.
    with quick_switches():
        rows = copy_statements.read_copy(session, statement, data)
        count = session.load_rows(rows.table, rows.rows)
    if count is None:  # triggers, indexes, a key held or given twice, a NULL: the usual way
        count = session.write(
            lambda txn: executor.insert_rows(session, txn, rows.table, rows.columns, rows.rows)
        )
    return message_result(sql, f"{count} row(s) copied", count)


def copy_out(session: Session, sql: str) -> CopyOutput:
    """Run `COPY ... TO STDOUT`; the answer's `chunks()` are its data."""
    statement = copy_statement(sql)
    if not isinstance(statement, ast.CopyTo):
        raise ValueError("copy_out takes one COPY ... TO STDOUT")
    return copy_output(session, statement)


class _Counted(io.RawIOBase):
    """COPY data counted against the memory limit as the reader takes it (`read` only)."""

    def __init__(self, data: IO[bytes], memory: MemoryBudget) -> None:
        super().__init__()
        self._data = data
        self._memory = memory
        self._counted = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        block = self._data.read(-1 if size is None else size)
        self._counted += len(block) + ROW_OVERHEAD * block.count(b"\n")
        memory = self._memory
        used = memory.used_bytes
        if used + self._counted > memory.limit_bytes:
            raise MemoryFull(
                f"COPY FROM STDIN: the rows read so far ({self._counted / MB:.0f} MB as table"
                f" data) and the table data in use ({used / MB:.0f} MB) pass the memory limit"
                f" for table data (memory_mb, {memory.limit_bytes / MB:.0f} MB); nothing was"
                " copied; copy fewer rows at once, delete rows or drop a table, or raise"
                " memory_mb and restart"
            )
        return block
