"""CREATE, ALTER and DROP PUBLICATION, and the publications of a data folder.

A publication is a named set of a database's tables (or all of them, `FOR ALL TABLES`)
that a logical replication stream with the `pgoutput` plugin shows (spec: replication). It
belongs to the user who made it, and shows only tables that user may read when the stream
reads them. Publications are one JSON file of the data folder, replaced whole (temporary
file, fsync, rename, fsync of the folder) before the statement answers; they are not in a
database's log, so a transaction's ROLLBACK does not undo them (as other statements on
users and rights). Making, changing or dropping one needs ADMIN on the database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refimpl.engine.files import FileOps, replace_durably
from refimpl.engine.result import Result, message_result
from refimpl.engine.rights import Right
from refimpl.errors import SqlError, UnknownPublication, UnknownTable
from refimpl.sql.ast_publications import AlterPublication, CreatePublication, DropPublication

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

PUBLICATIONS_FILE = "publications.json"


@dataclass(frozen=True, slots=True)
class Publication:
    database: str
    name: str
    owner: str
    all_tables: bool
    tables: tuple[str, ...]  # as named at CREATE (the table's own spelling)

    def includes(self, table: str) -> bool:
        """Whether the publication names `table` (any case)."""
        return self.all_tables or table.lower() in {t.lower() for t in self.tables}


class PublicationStore:
    """The publications of one data folder. Thread-safe."""

    def __init__(self, folder: Path, files: FileOps) -> None:
        self._file = folder / PUBLICATIONS_FILE
        self._files = files
        self._lock = threading.Lock()
        self._all: dict[tuple[str, str], Publication] = {}
        if self._file.exists():
            for raw in json.loads(self._file.read_text("utf-8"))["publications"]:
                raw["tables"] = tuple(raw["tables"])
                found = Publication(**raw)
                self._all[(found.database.lower(), found.name)] = found

    def of(self, database: str) -> list[Publication]:
        with self._lock:
            return sorted(
                (p for (db, _), p in self._all.items() if db == database.lower()),
                key=lambda p: p.name,
            )

    def get(self, database: str, name: str) -> Publication:
        with self._lock:
            found = self._all.get((database.lower(), name))
        if found is None:
            raise UnknownPublication(name)
        return found

    def put(self, publication: Publication, *, new: bool) -> None:
        key = (publication.database.lower(), publication.name)
        with self._lock:
            if new and key in self._all:
                raise SqlError(f'publication "{publication.name}" already exists')
            self._all[key] = publication
            self._save()

    def drop(self, database: str, names: Sequence[str], if_exists: bool) -> int:
        with self._lock:
            keys = [(database.lower(), n) for n in names]
            missing = [n for n, k in zip(names, keys, strict=True) if k not in self._all]
            if missing and not if_exists:
                raise UnknownPublication(missing[0])
            dropped = [k for k in keys if self._all.pop(k, None) is not None]
            if dropped:
                self._save()
            return len(dropped)

    def _save(self) -> None:
        kept = [asdict(p) for p in self._all.values()]
        data = json.dumps({"publications": kept}, indent=1).encode("utf-8")
        replace_durably(self._files, self._file, data)


_STORES: dict[Path, PublicationStore] = {}
_STORES_LOCK = threading.Lock()


def publications_at(folder: Path, files: FileOps) -> PublicationStore:
    """The one store of a data folder in this process (read at its first use)."""
    key = folder.resolve()
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = PublicationStore(folder, files)
        return store


def _store(context: StatementContext) -> PublicationStore:
    database = context.database
    return publications_at(database.path.parent, database.files)


def _tables(context: StatementContext, names: Sequence[str]) -> tuple[str, ...]:
    """The tables named, each checked to exist, in their own spelling."""
    found: list[str] = []
    for name in names:
        table = context.database.tables.get(name.lower())
        if table is None:
            raise UnknownTable(name)
        if table.schema.name.lower() not in {f.lower() for f in found}:
            found.append(table.schema.name)
    return tuple(found)


def _create(context: StatementContext, statement: CreatePublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    tables = () if statement.tables is None else _tables(context, statement.tables)
    publication = Publication(
        context.database.name,
        statement.name,
        context.principal.name or "",
        statement.tables is None,
        tables,
    )
    _store(context).put(publication, new=True)
    return message_result(text, f"publication '{statement.name}' created")


def _alter(context: StatementContext, statement: AlterPublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    store = _store(context)
    publication = store.get(context.database.name, statement.name)
    if publication.all_tables:
        raise SqlError(
            f'publication "{statement.name}" is defined as FOR ALL TABLES; tables cannot be'
            " added to or dropped from it"
        )
    named = _tables(context, statement.tables)
    lowered = {t.lower() for t in named}
    if statement.action == "ADD":
        tables = publication.tables + tuple(t for t in named if not publication.includes(t))
    elif statement.action == "DROP":
        absent = [t for t in named if not publication.includes(t)]
        if absent:
            raise SqlError(f'relation "{absent[0]}" is not part of the publication')
        tables = tuple(t for t in publication.tables if t.lower() not in lowered)
    else:
        tables = named
    store.put(replace(publication, tables=tables), new=False)
    return message_result(text, f"publication '{statement.name}' altered")


def _drop(context: StatementContext, statement: DropPublication, text: str, _: Any) -> Result:
    context.authorize(Right.ADMIN)
    count = _store(context).drop(context.database.name, statement.names, statement.if_exists)
    return message_result(text, f"{count} publication(s) dropped", count)


HANDLERS: dict[type, Callable[..., Result]] = {
    CreatePublication: _create,
    AlterPublication: _alter,
    DropPublication: _drop,
}
