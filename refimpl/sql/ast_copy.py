"""Statement objects of COPY and BACKUP, which move data out of and into the database, and of
LISTEN, UNLISTEN and NOTIFY, which move notifications between connections (part of
`refimpl.sql.ast`, which re-exports the COPY names: use them as `ast.CopyFrom`;
`BackupDatabase` and the notification statements are imported from here)."""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.sql.ast_access import Statement

# A COPY option's value as written: text ('x', csv), a boolean (HEADER, HEADER true), or None.
CopyValue = str | bool | None


@dataclass(frozen=True, slots=True)
class CopyOption:
    name: str  # lower case: format, header, delimiter, null, quote, escape
    value: CopyValue


@dataclass(frozen=True, slots=True)
class CopyFrom(Statement):
    """`COPY t [(cols)] FROM STDIN | 'file' [WITH (...)]`; `file` None means STDIN."""

    table: str
    columns: tuple[str, ...] | None
    file: str | None
    options: tuple[CopyOption, ...] = ()


@dataclass(frozen=True, slots=True)
class CopyTo(Statement):
    """`COPY t [(cols)] TO STDOUT` or `COPY (query) TO STDOUT`: exactly one of table, query."""

    table: str | None
    columns: tuple[str, ...] | None
    query: Statement | None  # an ast.Query (ast imports this module, so it is not named)
    options: tuple[CopyOption, ...] = ()


@dataclass(frozen=True, slots=True)
class BackupDatabase(Statement):
    """`BACKUP DATABASE d TO 'name'`: `name` a folder to make inside the backup folder."""

    database: str
    target: str


@dataclass(frozen=True, slots=True)
class Listen(Statement):
    """`LISTEN channel`: the connection is sent the notifications of `channel`."""

    channel: str


@dataclass(frozen=True, slots=True)
class Unlisten(Statement):
    """`UNLISTEN channel`, or `UNLISTEN *` (`channel` None): no more of them."""

    channel: str | None


@dataclass(frozen=True, slots=True)
class Notify(Statement):
    """`NOTIFY channel [, 'payload']`: sent to the channel's listeners at the commit."""

    channel: str
    payload: str = ""
