"""The publications of a data folder: one JSON file, owned by the instance.

Publications are one JSON file of the data folder, replaced whole (temporary file, fsync,
rename, fsync of the folder) before a change to them is acknowledged. A file that cannot be
read as publications stops the start with a StorageError naming it and the way on.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from refimpl.engine.files import FileOps
from refimpl.engine.statements.replication_files import Field, read_records, write_records
from refimpl.errors import SqlError, UnknownPublication

PUBLICATIONS_FILE = "publications.json"
_FIELDS = {
    "database": Field(str),
    "name": Field(str),
    "owner": Field(str),
    "all_tables": Field(bool),
    "tables": Field(list),
}
_WAY_ON = (
    "restore the file from a backup, or move it aside to start without publications"
    " (then make them again: CREATE PUBLICATION)"
)


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
        for raw in read_records(self._file, "publications", _FIELDS, "publications", _WAY_ON):
            found = Publication(**{**raw, "tables": tuple(raw["tables"])})
            self._all[(found.database.lower(), found.name)] = found

    def count(self) -> int:
        """How many publications there are, in every database."""
        with self._lock:
            return len(self._all)

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

    def forget_database(self, database: str) -> None:
        """The database is dropped: its publications go, durably."""
        with self._lock:
            doomed = [key for key in self._all if key[0] == database.lower()]
            for key in doomed:
                del self._all[key]
            if doomed:
                self._save()

    def _save(self) -> None:
        kept = [{**asdict(p), "tables": list(p.tables)} for p in self._all.values()]
        write_records(self._files, self._file, "publications", kept)
