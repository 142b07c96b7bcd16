"""Replication slots from SQL, as PostgreSQL's functions (spec: replication):

- `SELECT * FROM pg_create_logical_replication_slot('s', 'test_decoding')`: a slot at the
  durable position; the row (slot_name, lsn);
- `SELECT pg_drop_replication_slot('s')`: NULL (55006 while a connection streams from it);
- `SELECT * FROM pg_logical_slot_get_changes('s', upto_lsn, upto_nchanges, 'option',
  'value', ...)` and `pg_logical_slot_peek_changes(...)`: the slot's next transactions as
  test_decoding's rows (lsn, xid, data), whole transactions only, up to `upto_lsn` and until
  `upto_nchanges` rows were reached (NULL: no bound); `get` moves the slot past them,
  durable before it answers, `peek` leaves it.

Each needs the REPLICATION right, as a replication connection does (here: the admin user);
a stream shows the tables the caller may read. A pgoutput slot is 0A000 here: its output is
binary, and SQL reads text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine import replication_positions as positions
from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.query.expressions import compile_expression, constant_value
from refimpl.engine.query.session_functions import SessionOf
from refimpl.engine.replication.decoding import read_transactions
from refimpl.engine.replication.test_decoding import TestDecoding
from refimpl.engine.result import Column
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import Forbidden, NotAllowed, SlotError, SqlError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

SQL_PID = -1  # the holder a SQL read marks a slot with while it reads
READ_TRANSACTIONS = 1000  # transactions one read of the log takes at most


@dataclass(slots=True)
class _Rows:
    """A table function's rows."""

    columns: list[Column]
    qualifier: str | None
    values: list[tuple[Any, ...]]
    schema: None = None

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return iter(self.values)


def _require_replication(context: StatementContext, what: str) -> None:
    if not context.principal.is_admin:
        raise Forbidden(f"{what}() needs the REPLICATION right; over SQL only the admin holds it")


def _arguments(source: ast.FunctionSource, params: Sequence[Any]) -> list[Any]:
    scope = Scope(columns=[], params=params)
    return [constant_value(arg, scope) for arg in source.args]


def create_slot(
    context: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> _Rows:
    _require_replication(context, source.name)
    args = _arguments(source, params)
    if len(args) not in (2, 3, 4) or not all(isinstance(a, str) for a in args[:2]):
        raise SqlError(
            "pg_create_logical_replication_slot() takes a slot name and a plugin:"
            " pg_create_logical_replication_slot('s', 'test_decoding')"
        )
    name, plugin = args[0], args[1]
    if plugin not in ("test_decoding", "pgoutput"):
        raise SlotError("58P01", f'could not access file "{plugin}": No such file or directory')
    if len(args) > 2 and args[2]:
        raise NotAllowed("a temporary slot lives with a replication connection; make it there")
    database = context.database
    at = positions.end_of(database.log.durable_lsn)
    context.catalog.slots.create(
        name,
        database.name,
        plugin,
        context.principal.name or "",
        at,
        temporary=False,
    )
    columns = [Column("slot_name", "STRING"), Column("lsn", "STRING")]
    return _Rows(columns, source.alias or source.name, [(name, positions.text(at))])


def _changes(
    context: StatementContext, source: ast.FunctionSource, params: Sequence[Any], advance: bool
) -> _Rows:
    _require_replication(context, source.name)
    args = _arguments(source, params)
    if len(args) < 3 or len(args) % 2 == 0 or not isinstance(args[0], str):
        raise SqlError(
            f"{source.name}() takes a slot, upto_lsn, upto_nchanges and option/value pairs:"
            f" {source.name}('s', NULL, NULL, 'include-xids', '0')"
        )
    name, upto_text, upto_count = args[0], args[1], args[2]
    upto = None if upto_text is None else positions.parse(str(upto_text))
    options = dict(zip(args[3::2], args[4::2], strict=True))
    database = context.database
    store = context.catalog.slots
    slot = store.get(name)
    if slot.plugin != "test_decoding":
        raise NotAllowed(
            f'logical decoding output plugin "{slot.plugin}" produces binary output; read it'
            " over a replication connection (START_REPLICATION)"
        )
    if slot.database.lower() != database.name.lower():
        raise SlotError("55000", f'replication slot "{name}" was not created in this database')
    plugin = TestDecoding({str(k): None if v is None else str(v) for k, v in options.items()})
    store.acquire(name, SQL_PID)
    try:
        resume = positions.resume(slot.confirmed)
        rows: list[tuple[Any, ...]] = []
        last = slot.confirmed
        for txn in read_transactions(
            database, resume.done_lsn, context.can_read, READ_TRANSACTIONS
        ):
            if upto is not None and positions.end_of(txn.lsn) > upto:
                break
            skip = resume.skip if txn.lsn == resume.done_lsn + 1 else 0
            for at, data in plugin.transaction(txn, skip):
                rows.append((positions.text(at), txn.lsn & 0xFFFFFFFF, data.decode("utf-8")))
            last = positions.end_of(txn.lsn)
            if upto_count is not None and len(rows) >= int(upto_count):
                break
        if advance:
            store.confirm(name, last)
    finally:
        store.release(name, SQL_PID)
    columns = [Column("lsn", "STRING"), Column("xid", "BIGINT"), Column("data", "STRING")]
    return _Rows(columns, source.alias or source.name, rows)


def get_changes(
    context: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> _Rows:
    return _changes(context, source, params, advance=True)


def peek_changes(
    context: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> _Rows:
    return _changes(context, source, params, advance=False)


TABLE_FUNCTIONS = {
    "pg_create_logical_replication_slot": create_slot,
    "pg_logical_slot_get_changes": get_changes,
    "pg_logical_slot_peek_changes": peek_changes,
}


def drop_function(
    call: ast.FuncCall, scope: Scope, session: SessionOf[StatementContext]
) -> Compiled:
    """`pg_drop_replication_slot('s')`: NULL once dropped."""
    if len(call.args) != 1:
        raise SqlError("pg_drop_replication_slot() takes a slot name")
    name = compile_expression(call.args[0], scope).fn

    def run(row: Sequence[Any]) -> None:
        context = session()
        _require_replication(context, "pg_drop_replication_slot")
        context.catalog.slots.drop(str(name(row)))

    return Compiled(run, "STRING")
