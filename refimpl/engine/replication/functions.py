"""The replication positions SQL reads: `pg_current_wal_lsn()` and its two siblings.

Each answers the database's durable position in PostgreSQL's `X/Y` form (spec:
replication): the end of the last durable transaction, which a reader resumes from to get
exactly what commits next. KDB's log has no separate insert or flush positions a reader
could use, so `pg_current_wal_insert_lsn()` and `pg_current_wal_flush_lsn()` answer the
same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.engine import replication_positions as positions
from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.replication.sql_slots import drop_function
from refimpl.errors import SqlError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import ScalarFunction, StatementContext

NAMES = ("pg_current_wal_lsn", "pg_current_wal_flush_lsn", "pg_current_wal_insert_lsn")


def functions(context: StatementContext) -> dict[str, ScalarFunction]:
    """The position functions bound to `context`'s database."""
    log = context.database.log

    def build(call: ast.FuncCall, scope: Scope) -> Compiled:
        if call.args:
            raise SqlError(f"{call.name}() takes no arguments")
        return Compiled(lambda row: positions.text(positions.end_of(log.durable_lsn)), "STRING")

    return {**dict.fromkeys(NAMES, build), "pg_drop_replication_slot": drop_function(context)}
