"""Running one parsed statement for a session.

Reads outside a transaction see the committed tables (under the database's state lock, so
never a half-applied commit). Writes run in a transaction: the session's explicit one, or
one of their own that commits when the statement ends. A statement's own row changes are
collected first and merged into the transaction only when the whole statement succeeded,
so a failed statement changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine import ddl, values
from refimpl.engine.compiled import Scope, ScopeColumn
from refimpl.engine.expressions import compile_expression
from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.rev_sql import cache_plan
from refimpl.engine.schema import TableSchema
from refimpl.engine.select import AccessHints, QueryOutput, plan_access, run_select
from refimpl.engine.table import Ident, Row, Table, parts_for_period_range
from refimpl.engine.transaction import TableWork, Transaction
from refimpl.errors import (
    DuplicateKey,
    NotAllowed,
    SqlError,
    TableExists,
    TransactionError,
    TypeMismatch,
    UnknownFunction,
    UnknownTable,
)
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.session import Session

READ, WRITE, ADMIN = "READ", "WRITE", "ADMIN"


def now_micros() -> int:
    return time.time_ns() // 1000


# -- sources a SELECT reads --------------------------------------------------------------


class CommittedTable:
    """A committed table as a SELECT source (the caller holds the state lock)."""

    def __init__(self, table: Table, alias: str | None) -> None:
        self.table = table
        self.schema: TableSchema | None = table.schema
        self.qualifier = alias
        self.columns = [Column(c.name, c.type) for c in table.schema.columns]

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        if hints.ident is not None:
            row = self.table.get(hints.ident)
            return iter(() if row is None else (row,))
        parts = None
        if hints.low_period is not None or hints.high_period is not None or hints.symbol:
            parts = parts_for_period_range(
                self.table, hints.low_period, hints.high_period, hints.symbol
            )
        return self.table.scan(parts, hints.time_low, hints.time_high)


class TransactionTable:
    """A table as an open transaction sees it, as a SELECT source."""

    def __init__(self, work: TableWork, alias: str | None) -> None:
        self.work = work
        self.schema: TableSchema | None = work.schema
        self.qualifier = alias
        self.columns = [Column(c.name, c.type) for c in work.schema.columns]

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return self.work.rows(hints)


# -- dispatch ----------------------------------------------------------------------------


def execute(session: Session, statement: ast.Statement, text: str, params: Sequence[Any]) -> Result:
    handler = _HANDLERS.get(type(statement))
    if handler is None:
        raise NotAllowed(f"{type(statement).__name__} statements are not supported here")
    return handler(session, statement, text, params)


def _select(session: Session, statement: ast.Select, text: str, params: Sequence[Any]) -> Result:
    output = select_rows(session, statement, params)
    return query_result(text, output.columns, output.rows)


def select_rows(session: Session, statement: ast.Select, params: Sequence[Any]):  # noqa: ANN201
    """Run a SELECT with the session's rights and transaction; returns a QueryOutput."""
    source = statement.source
    functions = session.sql_functions()
    if source is None:
        return run_select(statement, None, params, now_micros(), functions)
    if isinstance(source, ast.FunctionSource):
        table_function = session.table_functions().get(source.name)
        if table_function is None:
            raise UnknownFunction(f"table function {source.name}() does not exist")
        row_source = table_function(session, source, statement, params)
        return run_select(statement, row_source, params, now_micros(), functions)
    session.authorize(READ, source.name)
    txn = session.transaction
    if txn is not None and source.name.lower() in txn.work:
        view = TransactionTable(txn.table(source.name), source.alias)
        return run_select(statement, view, params, now_micros(), functions)
    database = session.database
    with database.state_lock:
        table = database.tables.get(source.name.lower())
        if table is None:
            raise UnknownTable(source.name)
        # The revision is read under the state lock, before the query: see result_cache.
        key, token = cache_plan(database, table.schema, statement, params)
        if key is not None:
            cached = database.result_cache.get(key, token)
            if cached is not None:
                return QueryOutput(cached.columns, list(cached.rows))
        output = run_select(
            statement, CommittedTable(table, source.alias), params, now_micros(), functions
        )
    if key is not None:
        cells = len(output.rows) * max(1, len(output.columns))
        database.result_cache.put(key, token, QueryOutput(output.columns, list(output.rows)), cells)
    return output


def _subscribe(session: Session, statement: ast.Subscribe, text: str, params: Sequence[Any]):
    raise NotAllowed(
        "SUBSCRIBE answers more than once, so /exec cannot run it; "
        "use GET /api/subscribe?query=SUBSCRIBE SELECT ..."
    )


# -- INSERT, UPDATE, DELETE --------------------------------------------------------------


def _constant_scope(params: Sequence[Any]) -> Scope:
    return Scope(columns=[], params=params, now=now_micros(), clause="VALUES")


def _evaluate_constant(expr: ast.Expr, params: Sequence[Any], scope: Scope | None) -> Any:
    # The common cases without compiling: literals and parameters.
    if type(expr) is ast.Literal:
        return expr.value
    if type(expr) is ast.Param:
        if expr.index >= len(params):
            return compile_expression(expr, _constant_scope(params)).fn(())
        return params[expr.index]
    return compile_expression(expr, scope or _constant_scope(params)).fn(())


def _insert(session: Session, statement: ast.Insert, text: str, params: Sequence[Any]) -> Result:
    session.authorize(WRITE, statement.table)

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        schema = work.schema
        if statement.select is not None:
            output = select_rows(session, statement.select, params)
            source_rows: list[Sequence[Any]] = output.rows
        else:
            scope = None
            source_rows = [
                [_evaluate_constant(e, params, scope) for e in row] for row in statement.rows or ()
            ]
        count = insert_values(work, schema, statement.columns, source_rows)
        return message_result(text, f"{count} row(s) inserted", count)

    return session.write(run)


def insert_values(
    work: TableWork,
    schema: TableSchema,
    columns: Sequence[str] | None,
    source_rows: Sequence[Sequence[Any]],
) -> int:
    """Insert rows of values (in `columns` order, or the table's) into a transaction's table."""
    width = len(schema.columns)
    if columns is None:
        positions = list(range(width))
    else:
        positions = [schema.position(name) for name in columns]
        if len(set(positions)) != len(positions):
            raise SqlError("a column is named twice in the INSERT column list")
    types = [(schema.columns[p].type, schema.columns[p].name) for p in positions]
    full = len(positions) == width and positions == list(range(width))
    table = work.current()
    keyed = table.keyed
    dedup = bool(schema.dedup_key)
    changes: dict[Ident, Row | None] = {}
    coerce = values.coerce
    for number, source in enumerate(source_rows, start=1):
        if len(source) != len(positions):
            raise SqlError(
                f"row {number} has {len(source)} value(s) but {len(positions)} column(s) are"
                " being inserted"
            )
        converted = [coerce(v, t, n) for v, (t, n) in zip(source, types, strict=True)]
        if full:
            row = tuple(converted)
        else:
            slots: list[Any] = [None] * width
            for position, value in zip(positions, converted, strict=True):
                slots[position] = value
            row = tuple(slots)
        table.check_not_null(row)
        if keyed:
            ident = table.ident_of(row)
            existing = changes[ident] if ident in changes else work.get(ident)
            if existing is not None and not dedup:
                raise DuplicateKey(schema.name, ident[0] if len(ident) == 1 else ident)
        else:
            ident = (table.allocate_rowid(),)
        changes[ident] = row
    work.pending.update(changes)
    return len(source_rows)


def _table_scope(schema: TableSchema, params: Sequence[Any], clause: str) -> Scope:
    return Scope(
        columns=[ScopeColumn(i, c.type, c.name) for i, c in enumerate(schema.columns)],
        qualifiers=frozenset({schema.name.lower()}),
        params=params,
        now=now_micros(),
        clause=clause,
    )


def _matching(
    work: TableWork, schema: TableSchema, where: ast.Expr | None, params: Sequence[Any]
) -> list[tuple[Ident, Row]]:
    scope = _table_scope(schema, params, "WHERE")
    if where is None:
        return list(work.rows_with_idents())
    predicate = compile_expression(where, scope)
    if predicate.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"WHERE needs a BOOLEAN condition, not {predicate.type}")
    hints = plan_access(where, schema, scope)
    test = predicate.fn
    if hints.ident is not None:
        row = work.get(hints.ident)
        return [(hints.ident, row)] if row is not None and test(row) is True else []
    return [(ident, row) for ident, row in work.rows_with_idents() if test(row) is True]


def _update(session: Session, statement: ast.Update, text: str, params: Sequence[Any]) -> Result:
    session.authorize(WRITE, statement.table)

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        schema = work.schema
        table = work.current()
        scope = _table_scope(schema, params, "SET")
        assignments = []
        for name, expr in statement.assignments:
            position = schema.position(name)
            compiled = compile_expression(expr, scope)
            assignments.append((position, compiled.fn, schema.columns[position]))
        matched = _matching(work, schema, statement.where, params)
        updates = []
        for ident, row in matched:
            new = list(row)
            for position, fn, column in assignments:
                new[position] = values.coerce(fn(row), column.type, column.name)
            new_row = tuple(new)
            table.check_not_null(new_row)
            new_ident = table.ident_of(new_row) if table.keyed else ident
            updates.append((ident, new_ident, new_row))
        changes: dict[Ident, Row | None] = {}
        moved_away = {old for old, new, _ in updates if old != new}
        for old, new, _ in updates:
            if old != new:
                changes[old] = None
        dedup = bool(schema.dedup_key)
        assigned: set[Ident] = set()
        for old, new, new_row in updates:
            if old != new and not dedup:
                taken = new in assigned or (new not in moved_away and work.get(new) is not None)
                if taken:
                    raise DuplicateKey(schema.name, new[0] if len(new) == 1 else new)
            assigned.add(new)
            changes[new] = new_row
        work.pending.update(changes)
        return message_result(text, f"{len(updates)} row(s) updated", len(updates))

    return session.write(run)


def _delete(session: Session, statement: ast.Delete, text: str, params: Sequence[Any]) -> Result:
    session.authorize(WRITE, statement.table)

    def run(txn: Transaction) -> Result:
        work = txn.table(statement.table)
        schema = work.schema
        matched = _matching(work, schema, statement.where, params)
        count = len(matched)
        table = work.current()
        whole = _whole_periods(work, table, matched) if matched else []
        if whole:
            dropped = {part for part in table.partitions.keys() if part[0] in set(whole)}
            matched = [(i, r) for i, r in matched if table.part_of_ident(i) not in dropped]
            _drop_periods(txn, work, tuple(whole))
        for ident, _ in matched:
            work.pending[ident] = None
        return message_result(text, f"{count} row(s) deleted", count)

    return session.write(run)


def _whole_periods(work: TableWork, table: Table, matched: list[tuple[Ident, Row]]) -> list[str]:
    """Time periods every row of which the DELETE removes (they go as a partition drop)."""
    if table.layout.period is None or work.pending:
        return []
    per_period: dict[str, int] = {}
    for ident, _ in matched:
        part = table.part_of_ident(ident)
        if part is not None:
            per_period[part[0]] = per_period.get(part[0], 0) + 1
    sizes: dict[str, int] = {}
    for part, partition in table.partitions.items():
        sizes[part[0]] = sizes.get(part[0], 0) + len(partition)
    return sorted(p for p, n in per_period.items() if n == sizes.get(p))


def _drop_periods(txn: Transaction, work: TableWork, periods: tuple[str, ...]) -> int:
    work.seal(txn.entries)
    table = work.make_private()
    removed = ddl.drop_partitions(table, periods)
    statement = ast.DropPartitionList(table.schema.name, periods)
    txn.ddl(table.schema.name, _sql(statement))
    return removed


def _sql(node: ast.Statement) -> str:
    from refimpl.sql.printer import to_sql

    return to_sql(node)


# -- schema statements -------------------------------------------------------------------


def _create_table(session: Session, statement: ast.CreateTable, text: str, params) -> Result:
    session.authorize(ADMIN)

    def run(txn: Transaction) -> Result:
        if txn.has_table(statement.name):
            if statement.if_not_exists:
                return message_result(text, f"table '{statement.name}' already exists")
            raise TableExists(statement.name)
        table = ddl.create_table(statement)
        txn.create(table)
        txn.ddl(statement.name, ddl.canonical_create(table.schema))
        return message_result(text, f"table '{statement.name}' created")

    return session.write(run)


def _drop_table(session: Session, statement: ast.DropTable, text: str, params) -> Result:
    session.authorize(ADMIN)

    def run(txn: Transaction) -> Result:
        if not txn.has_table(statement.name):
            if statement.if_exists:
                return message_result(text, f"table '{statement.name}' does not exist")
            raise UnknownTable(statement.name)
        name = txn.table(statement.name).schema.name
        txn.drop(statement.name)
        txn.ddl(name, _sql(ast.DropTable(name)))
        return message_result(text, f"table '{name}' dropped")

    return session.write(run)


def _schema_change(
    session: Session,
    table_name: str,
    text: str,
    change: Callable[[Transaction, TableWork, Table], tuple[Table | None, ast.Statement, str, int]],
) -> Result:
    session.authorize(ADMIN)

    def run(txn: Transaction) -> Result:
        work = txn.table(table_name)
        work.seal(txn.entries)
        table = work.make_private()
        replacement, logged, message, count = change(txn, work, table)
        if replacement is not None:
            work.working = replacement
        txn.ddl(work.schema.name, _sql(logged))
        return message_result(text, message, count)

    return session.write(run)


def _truncate(session: Session, statement: ast.Truncate, text: str, params) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table):  # noqa: ANN202
        removed = table.clear()
        name = table.schema.name
        return None, ast.Truncate(name), f"table '{name}' truncated", removed

    return _schema_change(session, statement.name, text, change)


def _add_column(session: Session, statement: ast.AddColumn, text: str, params) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table):  # noqa: ANN202
        name = table.schema.name
        rebuilt = ddl.add_column(table, statement.column)
        message = f"column '{statement.column.name}' added to table '{name}'"
        return rebuilt, ast.AddColumn(name, statement.column), message, 0

    return _schema_change(session, statement.table, text, change)


def _drop_column(session: Session, statement: ast.DropColumn, text: str, params) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table):  # noqa: ANN202
        name = table.schema.name
        column = table.schema.columns[table.schema.position(statement.column)].name
        rebuilt = ddl.drop_column(table, statement.column)
        message = f"column '{column}' dropped from table '{name}'"
        return rebuilt, ast.DropColumn(name, column), message, 0

    return _schema_change(session, statement.table, text, change)


def _drop_partition_list(
    session: Session, statement: ast.DropPartitionList, text: str, params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table):  # noqa: ANN202
        name = table.schema.name
        ddl.drop_partitions(table, statement.partitions)
        count = len(statement.partitions)
        logged = ast.DropPartitionList(name, statement.partitions)
        return None, logged, f"{count} partition(s) dropped from table '{name}'", count

    return _schema_change(session, statement.table, text, change)


def _drop_partition_where(
    session: Session, statement: ast.DropPartitionWhere, text: str, params: Sequence[Any]
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table):  # noqa: ANN202
        name = table.schema.name
        if table.layout.period is None:
            raise SqlError(f"table '{name}' is not partitioned by time; it has no partitions")
        test = compile_expression(
            statement.where, _table_scope(table.schema, params, "DROP PARTITION WHERE")
        ).fn
        periods: dict[str, bool] = {}
        for part, partition in table.partitions.items():
            whole = all(test(row) is True for row in partition.values())
            periods[part[0]] = periods.get(part[0], True) and whole
        chosen = tuple(sorted(p for p, whole in periods.items() if whole))
        if chosen:
            ddl.drop_partitions(table, chosen)
        logged = ast.DropPartitionList(name, chosen)
        message = f"{len(chosen)} partition(s) dropped from table '{name}'"
        return None, logged, message, len(chosen)

    return _schema_change(session, statement.table, text, change)


# -- transactions, databases, users, maintenance -----------------------------------------


def _begin(session: Session, statement: ast.Begin, text: str, params) -> Result:
    if session.transaction is not None:
        raise TransactionError("a transaction is already open; COMMIT or ROLLBACK it first")
    session.begin()
    return message_result(text, "transaction started")


def _commit(session: Session, statement: ast.Commit, text: str, params) -> Result:
    if session.transaction is None:
        raise TransactionError("there is no open transaction to commit; BEGIN one first")
    session.commit()
    return message_result(text, "transaction committed")


def _rollback(session: Session, statement: ast.Rollback, text: str, params) -> Result:
    if session.transaction is None:
        raise TransactionError("there is no open transaction to roll back")
    session.rollback()
    return message_result(text, "transaction rolled back")


def _outside_transaction(session: Session, what: str) -> None:
    if session.transaction is not None:
        raise TransactionError(f"{what} cannot run inside a transaction; COMMIT first")


def _checkpoint(session: Session, statement: ast.Checkpoint, text: str, params) -> Result:
    session.authorize(ADMIN)
    _outside_transaction(session, "CHECKPOINT")
    lsn = session.database.checkpoint()
    return message_result(text, f"checkpoint written at LSN {lsn}")


def _create_database(session: Session, statement: ast.CreateDatabase, text: str, params):
    _outside_transaction(session, "CREATE DATABASE")
    session.require_admin_user("CREATE DATABASE")
    created = session.instance.create_database(statement.name, statement.if_not_exists)
    word = "created" if created else "already exists"
    return message_result(text, f"database '{statement.name}' {word}")


def _drop_database(session: Session, statement: ast.DropDatabase, text: str, params):
    _outside_transaction(session, "DROP DATABASE")
    session.require_admin_user("DROP DATABASE")
    dropped = session.instance.drop_database(
        statement.name, statement.if_exists, current=session.database.name
    )
    word = "dropped" if dropped else "does not exist"
    return message_result(text, f"database '{statement.name}' {word}")


def _alter_database(session: Session, statement: ast.AlterDatabaseSet, text: str, params):
    _outside_transaction(session, "ALTER DATABASE")
    session.authorize(ADMIN, database=statement.name)
    database = session.instance.database(statement.name)
    database.set_setting(statement.setting, statement.value, _sql(statement))
    return message_result(
        text, f"database '{database.name}' {statement.setting} set to '{statement.value}'"
    )


def _user_statement(session: Session, statement: ast.Statement, text: str, params) -> Result:
    _outside_transaction(session, "a user or grant statement")
    result = session.instance.access.execute(
        statement,
        session.principal,
        session.database.name,
        database_exists=session.instance.has_database,
    )
    result.query = text
    return result


# -- SHOW --------------------------------------------------------------------------------


def _visible_table(session: Session, name: str) -> TableSchema:
    txn = session.transaction
    if txn is not None and txn.has_table(name):
        return txn.table(name).schema
    with session.database.state_lock:
        table = session.database.tables.get(name.lower())
    if table is None:
        raise UnknownTable(name)
    return table.schema


def _show_tables(session: Session, statement: ast.ShowTables, text: str, params) -> Result:
    txn = session.transaction
    if txn is not None:
        names = txn.table_names()
    else:
        with session.database.state_lock:
            names = sorted((t.schema.name for t in session.database.tables.values()), key=str.lower)
    readable = [n for n in names if session.can_read(n)]
    return query_result(text, [Column("table", "STRING")], [(n,) for n in readable])


def _show_columns(session: Session, statement: ast.ShowColumns, text: str, params) -> Result:
    session.authorize(READ, statement.table)
    schema = _visible_table(session, statement.table)
    keys = {n.lower() for n in schema.primary_key}
    time_column = (schema.timeseries or "").lower()
    rev = (schema.rev_column or "").lower()
    rows = [
        (c.name, c.type, c.name.lower() in keys, c.name.lower() == time_column,
         c.name.lower() == rev)
        for c in schema.columns
    ]
    columns = [
        Column("column", "STRING"),
        Column("type", "STRING"),
        Column("primary_key", "BOOLEAN"),
        Column("timeseries", "BOOLEAN"),
        Column("rev", "BOOLEAN"),
    ]
    return query_result(text, columns, rows)


def _show_create(session: Session, statement: ast.ShowCreateTable, text: str, params) -> Result:
    session.authorize(READ, statement.table)
    schema = _visible_table(session, statement.table)
    columns = [Column("table", "STRING"), Column("statement", "STRING")]
    return query_result(text, columns, [(schema.name, ddl.canonical_create(schema))])


_HANDLERS: dict[type, Callable[..., Result]] = {
    ast.Select: _select,
    ast.Subscribe: _subscribe,
    ast.Insert: _insert,
    ast.Update: _update,
    ast.Delete: _delete,
    ast.CreateTable: _create_table,
    ast.DropTable: _drop_table,
    ast.Truncate: _truncate,
    ast.AddColumn: _add_column,
    ast.DropColumn: _drop_column,
    ast.DropPartitionList: _drop_partition_list,
    ast.DropPartitionWhere: _drop_partition_where,
    ast.Begin: _begin,
    ast.Commit: _commit,
    ast.Rollback: _rollback,
    ast.Checkpoint: _checkpoint,
    ast.CreateDatabase: _create_database,
    ast.DropDatabase: _drop_database,
    ast.AlterDatabaseSet: _alter_database,
    ast.ShowTables: _show_tables,
    ast.ShowColumns: _show_columns,
    ast.ShowCreateTable: _show_create,
    ast.CreateUser: _user_statement,
    ast.DropUser: _user_statement,
    ast.CreateToken: _user_statement,
    ast.DropToken: _user_statement,
    ast.GrantRole: _user_statement,
    ast.RevokeRole: _user_statement,
    ast.GrantSelect: _user_statement,
    ast.RevokeSelect: _user_statement,
    ast.ShowUsers: _user_statement,
    ast.ShowGrants: _user_statement,
}
