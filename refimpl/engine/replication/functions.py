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
from refimpl.engine.query.session_functions import SessionOf
from refimpl.engine.replication.sql_slots import drop_function
from refimpl.errors import SqlError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import ScalarFunction, StatementContext

NAMES = ("pg_current_wal_lsn", "pg_current_wal_flush_lsn", "pg_current_wal_insert_lsn")


def _durable_position(
    call: ast.FuncCall, scope: Scope, session: SessionOf[StatementContext]
) -> Compiled:
    if call.args:
        raise SqlError(f"{call.name}() takes no arguments")
    return Compiled(
        lambda row: positions.text(positions.end_of(session().database.log.durable_lsn)),
        "STRING",
    )


# The position functions of the database each call runs for, and dropping a slot.
FUNCTIONS: dict[str, ScalarFunction] = {
    **dict.fromkeys(NAMES, _durable_position),
    "pg_drop_replication_slot": drop_function,
}
