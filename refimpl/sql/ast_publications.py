"""Statement objects of publications: the tables a logical replication stream with the
`pgoutput` plugin shows (spec: replication). Used as `ast_publications.CreatePublication`."""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.sql.ast_access import Statement


@dataclass(frozen=True, slots=True)
class CreatePublication(Statement):
    name: str
    tables: tuple[str, ...] | None  # None: FOR ALL TABLES


@dataclass(frozen=True, slots=True)
class AlterPublication(Statement):
    name: str
    action: str  # "ADD", "DROP" or "SET"
    tables: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropPublication(Statement):
    names: tuple[str, ...]
    if_exists: bool = False
