"""CommandComplete tags as PostgreSQL writes them: `INSERT 0 2`, `UPDATE 1`, `SELECT 3`, ...

A query answers `SELECT n` whatever statement produced its rows (SHOW TABLES, CREATE
TOKEN); any other statement its PostgreSQL name, with the count where PostgreSQL gives one.
Statements PostgreSQL lacks get a tag of their own words (`CHECKPOINT`, `DROP TOKEN`).
"""

from __future__ import annotations

from refimpl.engine.result import Result
from refimpl.pgwire import messages as m
from refimpl.sql import ast

_COUNTED = {
    "Insert": "INSERT 0 {n}",
    "Update": "UPDATE {n}",
    "Delete": "DELETE {n}",
    "Truncate": "TRUNCATE TABLE",
    "CopyFrom": "COPY {n}",
    "CopyTo": "COPY {n}",
    "Fetch": "MOVE {n}",  # a FETCH answers rows: `FETCH n` below
}
_TAGS = {
    "CreateTable": "CREATE TABLE",
    "DropTable": "DROP TABLE",
    "CreateView": "CREATE VIEW",
    "DropView": "DROP VIEW",
    "AddColumn": "ALTER TABLE",
    "DropColumn": "ALTER TABLE",
    "AlterReplicaIdentity": "ALTER TABLE",
    "DropPartitionList": "ALTER TABLE",
    "DropPartitionWhere": "ALTER TABLE",
    "CreateDatabase": "CREATE DATABASE",
    "DropDatabase": "DROP DATABASE",
    "AlterDatabaseSet": "ALTER DATABASE",
    "Begin": "BEGIN",
    "Commit": "COMMIT",
    "Rollback": "ROLLBACK",
    "RollbackTo": "ROLLBACK",
    "Savepoint": "SAVEPOINT",
    "ReleaseSavepoint": "RELEASE",
    "DeclareCursor": "DECLARE CURSOR",
    "CloseCursor": "CLOSE CURSOR",
    "Checkpoint": "CHECKPOINT",
    "CreateUser": "CREATE ROLE",
    "DropUser": "DROP ROLE",
    "DropToken": "DROP TOKEN",
    "GrantRole": "GRANT",
    "GrantSelect": "GRANT",
    "RevokeRole": "REVOKE",
    "RevokeSelect": "REVOKE",
}


def command_tag(statement: ast.Statement, result: Result, rows: int | None = None) -> str:
    """The tag of `statement`'s answer; `rows`: the rows sent, for a query sent in parts."""
    name = type(statement).__name__
    if result.is_query and name not in ("Insert", "Update", "Delete"):  # RETURNING's rows
        verb = "FETCH" if isinstance(statement, ast.Fetch) else "SELECT"
        return f"{verb} {len(result.rows) if rows is None else rows}"
    counted = _COUNTED.get(name)
    if counted is not None:
        return counted.format(n=result.count)
    return _TAGS.get(name) or _words(name)


def _words(name: str) -> str:
    """`ShowCreateTable` -> `SHOW CREATE TABLE`: for statements added after this table."""
    out: list[str] = []
    for ch in name:
        if ch.isupper() and out:
            out.append(" ")
        out.append(ch.upper())
    return "".join(out)


def notices(statement: ast.Statement | None, result: Result) -> list[m.ServerMessage]:
    """A NOTICE for IF [NOT] EXISTS that found nothing to do, as PostgreSQL sends one; its
    text is the message `/exec` answers (`table 't' already exists`)."""
    skipped = getattr(statement, "if_not_exists", False) or getattr(statement, "if_exists", False)
    message = result.message or ""
    if skipped and message.endswith(("already exists", "does not exist")):
        return [m.ErrorResponse("00000", f"{message}, skipping", "NOTICE", notice=True)]
    return []
