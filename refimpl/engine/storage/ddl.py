"""Schema changes applied to tables: shared by statements and by log replay.

Both paths call the same functions, so what recovery rebuilds is exactly what the statement
did. Each function works on a table the caller may change (a transaction's private clone,
or a table being rebuilt from the log).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.storage.table import Table, partitions_named
from refimpl.errors import SqlError
from refimpl.sql import ast
from refimpl.sql.printer import to_sql


def create_table(statement: ast.CreateTable) -> Table:
    return Table(TableSchema.from_create(statement))


def add_column(table: Table, column: ast.ColumnDef) -> Table:
    schema = table.schema.with_column(column)
    return table.rebuilt(schema, lambda row: (*row, None))


def drop_column(table: Table, name: str) -> Table:
    position = table.schema.position(name)
    schema = table.schema.without_column(name)
    return table.rebuilt(schema, lambda row: row[:position] + row[position + 1 :])


def create_index(table: Table, index: ast.IndexDef) -> Table:
    """The table with one more index, built from its rows (its rows are shared)."""
    return table.reindexed(table.schema.with_index(index))


def drop_index(table: Table, name: str) -> Table:
    return table.reindexed(table.schema.without_index(name))


def set_replica_identity(table: Table, full: bool) -> Table:
    """The table (its rows shared) with before-images logged from now on, or no more."""
    return table.reindexed(replace(table.schema, replica_identity_full=full))


def drop_partitions(table: Table, names: tuple[str, ...]) -> int:
    """Drop the named periods; returns rows removed. An unknown name is an error."""
    parts = partitions_named(table, names)
    present = {part[0] for part in parts}
    missing = [name for name in names if name not in present]
    if missing:
        raise SqlError(
            f"table '{table.schema.name}' has no partition {', '.join(repr(m) for m in missing)}"
        )
    return table.drop_partitions(parts)


def apply_view_change(settings: dict, statement: ast.CreateView | ast.DropView) -> None:
    """CREATE VIEW or DROP VIEW onto a database's settings (`views`: name -> its SQL).

    The views dict is replaced, never changed in place: a checkpoint may be writing the old.
    """
    views = dict(settings.get("views") or {})
    if isinstance(statement, ast.CreateView):
        views[statement.name.lower()] = canonical_sql(
            ast.CreateView(statement.name, statement.query)
        )
    else:
        views.pop(statement.name.lower(), None)
    settings["views"] = views


# The statements of triggers and procedures, and the key of the database's state that keeps
# each kind (name -> canonical CREATE text).
ROUTINE_CHANGES = (ast.CreateTrigger, ast.DropTrigger, ast.CreateProcedure, ast.DropProcedure)
RoutineChange = ast.CreateTrigger | ast.DropTrigger | ast.CreateProcedure | ast.DropProcedure


def apply_routine_change(settings: dict[str, Any], statement: RoutineChange) -> None:
    """CREATE/DROP TRIGGER or PROCEDURE onto a database's settings (`triggers`,
    `procedures`: lower-case name -> canonical CREATE text). As for views, the dict is
    replaced, never changed in place."""
    key = "triggers" if isinstance(statement, ast.CreateTrigger | ast.DropTrigger) else "procedures"
    kept = dict(settings.get(key) or {})
    name = statement.name.lower()
    if isinstance(statement, ast.CreateTrigger | ast.CreateProcedure):
        kept[name] = canonical_sql(statement)
    else:
        kept.pop(name, None)
    settings[key] = kept


def canonical_create(schema: TableSchema) -> str:
    return to_sql(schema.to_create())


def canonical_sql(statement: ast.Statement) -> str:
    """A statement's canonical text, as the log and SHOW CREATE TABLE keep it."""
    return to_sql(statement)


def apply_logged_ddl(tables: dict[str, Table], statement: ast.Statement) -> None:
    """Replay one logged schema change onto the committed tables (recovery)."""
    if isinstance(statement, ast.CreateTable):
        tables[statement.name.lower()] = create_table(statement)
        return
    if isinstance(statement, ast.CreateIndex):
        key = statement.table.lower()
        tables[key] = create_index(tables[key], statement.index)
        return
    if isinstance(statement, ast.DropIndex) and statement.table is not None:
        key = statement.table.lower()
        tables[key] = drop_index(tables[key], statement.name)
        return
    name = getattr(statement, "name", None) or getattr(statement, "table", None)
    assert isinstance(name, str)
    key = name.lower()
    if isinstance(statement, ast.DropTable):
        tables.pop(key, None)
    elif isinstance(statement, ast.Truncate):
        tables[key].clear()
    elif isinstance(statement, ast.AddColumn):
        tables[key] = add_column(tables[key], statement.column)
    elif isinstance(statement, ast.DropColumn):
        tables[key] = drop_column(tables[key], statement.column)
    elif isinstance(statement, ast.AlterReplicaIdentity):
        tables[key] = set_replica_identity(tables[key], statement.full)
    elif isinstance(statement, ast.DropPartitionList):
        table = tables[key]
        table.drop_partitions(partitions_named(table, statement.partitions))
    else:
        raise SqlError(f"cannot replay {type(statement).__name__} from the log")
