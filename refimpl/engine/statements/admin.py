"""Statements about schema, transactions, databases, users and SHOW.

Each handler takes the `StatementContext`, the statement, its text and the parameters, checks
the right it needs and answers a `Result`; `executor` dispatches to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.compiled import table_scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.rights import Right
from refimpl.engine.statements.context import outside_transaction, visible_schema
from refimpl.engine.statements.triggers import drop_table_triggers
from refimpl.engine.storage import ddl
from refimpl.engine.storage.table import Table
from refimpl.engine.storage.transaction import TableWork, Transaction
from refimpl.errors import (
    Forbidden,
    SqlError,
    TableExists,
    TransactionError,
    Unauthorized,
    UnknownTable,
)
from refimpl.sql import ast
from refimpl.sql.ast_access import AlterUser
from refimpl.sql.parser import parse_cached

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


# A statement's `?` parameters: SQL values, each of whatever type its place takes.
Params = Sequence[Any]


def _create_table(
    context: StatementContext, statement: ast.CreateTable, text: str, params: Params
) -> Result:
    context.authorize(Right.ADMIN)

    def run(txn: Transaction) -> Result:
        # A view's name is taken too: the view would hide the table (spec: queries, Views).
        if txn.has_table(statement.name) or statement.name.lower() in context.database.views:
            if statement.if_not_exists:
                return message_result(text, f"table '{statement.name}' already exists")
            raise TableExists(statement.name)
        table = ddl.create_table(statement)
        txn.create(table)
        txn.ddl(statement.name, ddl.canonical_create(table.schema))
        return message_result(text, f"table '{statement.name}' created")

    return context.write(run)


def _drop_table(
    context: StatementContext, statement: ast.DropTable, text: str, params: Params
) -> Result:
    context.authorize(Right.ADMIN)
    database = context.database.name

    def run(txn: Transaction) -> Result:
        if not txn.has_table(statement.name):
            if statement.name.lower() in context.database.views:
                raise SqlError(f"'{statement.name}' is a view, not a table; drop it with DROP VIEW")
            if statement.if_exists:
                return message_result(text, f"table '{statement.name}' does not exist")
            raise UnknownTable(statement.name)
        name = txn.table(statement.name).schema.name
        txn.drop(statement.name)
        txn.ddl(name, ddl.canonical_sql(ast.DropTable(name)))
        drop_table_triggers(context, txn, name)
        # Once the drop has committed, a new table of that name must not inherit the old
        # one's table-level grants and revokes.
        txn.after_commit.append(lambda: context.access.forget_table(database, name))
        return message_result(text, f"table '{name}' dropped")

    return context.write(run)


# What a schema change answers: the table that replaces the old one (None: changed in place),
# the statement the log keeps, the message and the count of rows it touched.
_Change = tuple[Table | None, ast.Statement, str, int]


def _schema_change(
    context: StatementContext,
    table_name: str,
    text: str,
    change: Callable[[Transaction, TableWork, Table], _Change],
) -> Result:
    context.authorize(Right.ADMIN)

    def run(txn: Transaction) -> Result:
        work = txn.table(table_name)
        work.seal(txn.entries)
        table = work.make_private()
        replacement, logged, message, count = change(txn, work, table)
        if replacement is not None:
            work.working = replacement
        txn.ddl(work.schema.name, ddl.canonical_sql(logged))
        return message_result(text, message, count)

    return context.write(run)


def _truncate(
    context: StatementContext, statement: ast.Truncate, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        removed = table.clear()
        name = table.schema.name
        return None, ast.Truncate(name), f"table '{name}' truncated", removed

    return _schema_change(context, statement.name, text, change)


def _add_column(
    context: StatementContext, statement: ast.AddColumn, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        name = table.schema.name
        rebuilt = ddl.add_column(table, statement.column)
        message = f"column '{statement.column.name}' added to table '{name}'"
        return rebuilt, ast.AddColumn(name, statement.column), message, 0

    return _schema_change(context, statement.table, text, change)


def _drop_column(
    context: StatementContext, statement: ast.DropColumn, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        name = table.schema.name
        column = table.schema.columns[table.schema.position(statement.column)].name
        rebuilt = ddl.drop_column(table, statement.column)
        message = f"column '{column}' dropped from table '{name}'"
        return rebuilt, ast.DropColumn(name, column), message, 0

    return _schema_change(context, statement.table, text, change)


def _replica_identity(
    context: StatementContext, statement: ast.AlterReplicaIdentity, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        name = table.schema.name
        mode = "FULL" if statement.full else "DEFAULT"
        rebuilt = ddl.set_replica_identity(table, statement.full)
        message = f"table '{name}' replica identity set to {mode}"
        return rebuilt, ast.AlterReplicaIdentity(name, statement.full), message, 0

    return _schema_change(context, statement.table, text, change)


def _drop_partition_list(
    context: StatementContext, statement: ast.DropPartitionList, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        name = table.schema.name
        ddl.drop_partitions(table, statement.partitions)
        count = len(statement.partitions)
        logged = ast.DropPartitionList(name, statement.partitions)
        return None, logged, f"{count} partition(s) dropped from table '{name}'", count

    return _schema_change(context, statement.table, text, change)


def _drop_partition_where(
    context: StatementContext, statement: ast.DropPartitionWhere, text: str, params: Params
) -> Result:
    def change(txn: Transaction, work: TableWork, table: Table) -> _Change:
        name = table.schema.name
        if table.layout.period is None:
            raise SqlError(f"table '{name}' is not partitioned by time; it has no partitions")
        # The statement's time (`ts < now()`) and the session's functions, as in a WHERE of
        # a SELECT; the log keeps the partitions chosen, not the condition.
        scope = table_scope(
            table.schema, params, "DROP PARTITION WHERE", context.transaction_time()
        )
        scope.functions = context.sql_functions()
        test = compile_expression(statement.where, scope).fn
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

    return _schema_change(context, statement.table, text, change)


# -- transactions, databases, users, maintenance -----------------------------------------


def _begin(context: StatementContext, statement: ast.Begin, text: str, params: Params) -> Result:
    if context.transaction is not None and not context.implicit:
        raise TransactionError("a transaction is already open; COMMIT or ROLLBACK it first")
    context.begin()  # a text's implicit transaction becomes the block
    return message_result(text, "transaction started")


def _commit(context: StatementContext, statement: ast.Commit, text: str, params: Params) -> Result:
    if context.transaction is None:
        raise TransactionError("there is no open transaction to commit; BEGIN one first")
    context.commit()
    return message_result(text, "transaction committed")


def _rollback(
    context: StatementContext, statement: ast.Rollback, text: str, params: Params
) -> Result:
    if context.transaction is None:
        raise TransactionError("there is no open transaction to roll back")
    context.rollback()
    return message_result(text, "transaction rolled back")


def _checkpoint(
    context: StatementContext, statement: ast.Checkpoint, text: str, params: Params
) -> Result:
    context.authorize(Right.ADMIN)
    outside_transaction(context, "CHECKPOINT")
    lsn = context.database.checkpoint()
    return message_result(text, f"checkpoint written at LSN {lsn}")


def _create_database(
    context: StatementContext, statement: ast.CreateDatabase, text: str, params: Params
) -> Result:
    outside_transaction(context, "CREATE DATABASE")
    context.require_admin_user("CREATE DATABASE")
    created = context.catalog.create_database(statement.name, statement.if_not_exists)
    word = "created" if created else "already exists"
    return message_result(text, f"database '{statement.name}' {word}")


def _drop_database(
    context: StatementContext, statement: ast.DropDatabase, text: str, params: Params
) -> Result:
    outside_transaction(context, "DROP DATABASE")
    context.require_admin_user("DROP DATABASE")
    dropped = context.catalog.drop_database(
        statement.name, statement.if_exists, current=context.database.name
    )
    word = "dropped" if dropped else "does not exist"
    return message_result(text, f"database '{statement.name}' {word}")


def _alter_database(
    context: StatementContext, statement: ast.AlterDatabaseSet, text: str, params: Params
) -> Result:
    outside_transaction(context, "ALTER DATABASE")
    context.authorize(Right.ADMIN, database=statement.name)
    database = context.catalog.database(statement.name)
    database.set_setting(statement.setting, statement.value, ddl.canonical_sql(statement))
    return message_result(
        text, f"database '{database.name}' {statement.setting} set to '{statement.value}'"
    )


def _user_statement(
    context: StatementContext, statement: ast.Statement, text: str, params: Params
) -> Result:
    outside_transaction(context, "a user or grant statement")
    if isinstance(statement, ast.GrantSelect | ast.RevokeSelect):
        # The right to grant first: a caller without it learns nothing of the table.
        context.authorize(Right.ADMIN)
        if statement.table.lower() not in context.database.views:  # a view takes them too
            visible_schema(context, statement.table)  # UnknownTable for one not there
    result = context.access.execute(
        statement,
        context.principal,
        context.database.name,
        database_exists=context.catalog.has_database,
    )
    result.query = text
    return result


# -- SHOW --------------------------------------------------------------------------------


def _show_tables(
    context: StatementContext, statement: ast.ShowTables, text: str, params: Params
) -> Result:
    txn = context.transaction
    if txn is not None:
        names = txn.table_names()
    else:
        with context.database.state_lock:
            names = sorted((t.schema.name for t in context.database.tables.values()), key=str.lower)
    # A view is kept as its canonical CREATE VIEW, which has the name as it was written.
    views = [_view_name(sql) for sql in context.database.views.values()]
    listed = sorted(
        [(n, "table") for n in names] + [(n, "view") for n in views], key=lambda row: row[0].lower()
    )
    readable = [row for row in listed if context.can_read(row[0])]
    if not readable:
        context.authorize(Right.READ)  # nothing to show: say so only to those who may read
    return query_result(text, [Column("table", "STRING"), Column("kind", "STRING")], readable)


def _show_databases(
    context: StatementContext, statement: ast.ShowDatabases, text: str, params: Params
) -> Result:
    """The databases the caller holds a right in (all of them for the admin user): rights
    before existence, as the catalogs show them."""
    shown = []
    for name in sorted(context.catalog.database_names(), key=str.lower):
        try:
            context.access.check_any(context.principal, name)
        except (Forbidden, Unauthorized):
            continue
        shown.append((name,))
    return query_result(text, [Column("database", "STRING")], shown)


def _view_name(sql: str) -> str:
    statement = parse_cached(sql).statements[0]
    assert isinstance(statement, ast.CreateView)  # a database keeps only CREATE VIEW there
    return statement.name


def _show_columns(
    context: StatementContext, statement: ast.ShowColumns, text: str, params: Params
) -> Result:
    context.authorize(Right.READ, statement.table)
    schema = visible_schema(context, statement.table)
    keys = {n.lower() for n in schema.primary_key}
    time_column = (schema.timeseries or "").lower()
    rev = (schema.rev_column or "").lower()
    rows = [
        (
            c.name,
            c.type,
            c.name.lower() in keys,
            c.name.lower() == time_column,
            c.name.lower() == rev,
        )
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


def _show_create(
    context: StatementContext, statement: ast.ShowCreateTable, text: str, params: Params
) -> Result:
    context.authorize(Right.READ, statement.table)
    schema = visible_schema(context, statement.table)
    columns = [Column("table", "STRING"), Column("statement", "STRING")]
    return query_result(text, columns, [(schema.name, ddl.canonical_create(schema))])


HANDLERS: dict[type, Callable[..., Result]] = {
    ast.CreateTable: _create_table,
    ast.DropTable: _drop_table,
    ast.Truncate: _truncate,
    ast.AddColumn: _add_column,
    ast.DropColumn: _drop_column,
    ast.AlterReplicaIdentity: _replica_identity,
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
    ast.ShowDatabases: _show_databases,
    ast.ShowColumns: _show_columns,
    ast.ShowCreateTable: _show_create,
    ast.CreateUser: _user_statement,
    ast.DropUser: _user_statement,
    AlterUser: _user_statement,
    ast.CreateToken: _user_statement,
    ast.DropToken: _user_statement,
    ast.GrantRole: _user_statement,
    ast.RevokeRole: _user_statement,
    ast.GrantSelect: _user_statement,
    ast.RevokeSelect: _user_statement,
    ast.ShowUsers: _user_statement,
    ast.ShowGrants: _user_statement,
}
