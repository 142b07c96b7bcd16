"""Replication slots: a reader's name, output plugin and confirmed position, kept durable.

A slot keeps no log for itself (the log is kept by `wal_archive` as for every reader): it
is a name and a position. The slots of a data folder are one JSON file beside the users
file, replaced whole (a temporary file, fsync, rename, fsync of the folder) before a change
to them is acknowledged, so a confirmed position survives a crash. A temporary slot lives
in memory only and ends with the connection that made it. At most one connection streams
from a slot at a time (`acquire`).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from refimpl.engine.files import REAL_FILES, FileOps
from refimpl.engine.statements.publication_store import PUBLICATIONS_FILE, PublicationStore
from refimpl.engine.statements.replication_files import Field, read_records, write_records
from refimpl.errors import SlotError, StorageError

SLOTS_FILE = "replication_slots.json"
MAX_NAME = 63
_NAME = re.compile(r"[a-z0-9_]+")
DEFAULT_MAX_SLOTS = 10
_ACTIVE_WAIT_S = 0.05  # how often DROP ... WAIT looks whether the slot was let go
_FIELDS = {
    "name": Field(str),
    "database": Field(str),
    "plugin": Field(str),
    "owner": Field(str),
    "confirmed": Field(int),
    "created": Field(int),
    "temporary": Field(bool, required=False),
    "lost": Field(bool, required=False),
}
_WAY_ON = (
    "restore the file from a backup, or move it aside to start without slots (their"
    " clients then make them again and read the tables afresh)"
)


@dataclass(frozen=True, slots=True)
class Slot:
    name: str
    database: str
    plugin: str
    owner: str  # the user who made it; it streams what that user may read
    confirmed: int  # the position its client confirmed (spec: replication, positions)
    created: int  # the position it was made at: it never gives anything before
    temporary: bool = False
    lost: bool = False  # the log no longer holds what follows `confirmed`
    active_pid: int | None = field(default=None, compare=False)


class SlotStore:
    """The slots of one data folder. Thread-safe."""

    def __init__(self, folder: Path, files: FileOps) -> None:
        # How many slots the data folder may hold (pg_max_replication_slots; the server
        # sets it at its start): a `create` past it is 53400.
        self.limit = DEFAULT_MAX_SLOTS
        self._file = folder / SLOTS_FILE
        self._files = files
        self._lock = threading.Lock()
        self._slots: dict[str, Slot] = {}
        for raw in read_records(self._file, "slots", _FIELDS, "replication slots", _WAY_ON):
            slot = Slot(**raw)
            self._slots[slot.name] = slot

    def all(self) -> list[Slot]:
        with self._lock:
            return sorted(self._slots.values(), key=lambda s: s.name)

    def get(self, name: str) -> Slot:
        with self._lock:
            return self._get(name)

    def create(
        self,
        name: str,
        database: str,
        plugin: str,
        owner: str,
        at: int,
        *,
        temporary: bool,
        pid: int | None = None,
        limit: int | None = None,
    ) -> Slot:
        """A new slot at position `at`; a temporary one is held by `pid` at once. 42710 for
        a name taken, 53400 once the folder holds `limit` slots (default: `self.limit`)."""
        check_name(name)
        limit = self.limit if limit is None else limit
        with self._lock:
            if name in self._slots:
                raise SlotError("42710", f'replication slot "{name}" already exists')
            if len(self._slots) >= limit:
                raise SlotError(
                    "53400",
                    "all replication slots are in use; free one or increase"
                    f" pg_max_replication_slots (now {limit})",
                )
            slot = Slot(
                name,
                database,
                plugin,
                owner,
                at,
                at,
                temporary,
                active_pid=pid if temporary else None,
            )
            self._slots[name] = slot
            if not temporary:
                self._save()
        return slot

    def drop(self, name: str, *, wait: bool = False, pid: int | None = None) -> None:
        """Drop a slot; one another connection streams from is 55006 (or, with `wait`,
        dropped once it is let go)."""
        while True:
            with self._lock:
                slot = self._get(name)
                if slot.active_pid is None or slot.active_pid == pid:
                    del self._slots[name]
                    if not slot.temporary:
                        self._save()
                    return
                if not wait:
                    raise SlotError(
                        "55006",
                        f'replication slot "{name}" is active for PID {slot.active_pid}',
                    )
            time.sleep(_ACTIVE_WAIT_S)

    def acquire(self, name: str, pid: int) -> Slot:
        with self._lock:
            slot = self._get(name)
            if slot.active_pid is not None and slot.active_pid != pid:
                raise SlotError(
                    "55006", f'replication slot "{name}" is active for PID {slot.active_pid}'
                )
            slot = self._slots[name] = replace(slot, active_pid=pid)
            return slot

    def release(self, name: str, pid: int) -> None:
        """The connection `pid` no longer streams from the slot (a temporary one is gone)."""
        with self._lock:
            slot = self._slots.get(name)
            if slot is None or slot.active_pid != pid:
                return
            if slot.temporary:
                del self._slots[name]
            else:
                self._slots[name] = replace(slot, active_pid=None)

    def release_all(self, pid: int) -> None:
        """The connection `pid` ended: its temporary slots go, the others are let go."""
        for slot in self.all():
            if slot.active_pid == pid:
                self.release(slot.name, pid)

    def confirm(self, name: str, position: int) -> None:
        """The client confirmed `position`: durable before this returns (when it moved)."""
        with self._lock:
            slot = self._slots.get(name)
            if slot is None or position <= slot.confirmed:
                return
            self._slots[name] = replace(slot, confirmed=position)
            if not slot.temporary:
                self._save()

    def forget_database(self, database: str) -> None:
        """The database is dropped: its slots go, durably; 55006 (and none goes) while a
        client streams from one of them."""
        with self._lock:
            doomed = [s for s in self._slots.values() if s.database.lower() == database.lower()]
            active = [s for s in doomed if s.active_pid is not None]
            if active:
                raise SlotError(
                    "55006",
                    f'database "{database}" is used by an active logical replication slot'
                    f' ("{active[0].name}", PID {active[0].active_pid}); end its stream first',
                )
            for slot in doomed:
                del self._slots[slot.name]
            if doomed:
                self._save()

    def mark_lost(self, name: str) -> None:
        with self._lock:
            slot = self._slots.get(name)
            if slot is not None and not slot.lost:
                self._slots[name] = replace(slot, lost=True)
                if not slot.temporary:
                    self._save()

    def _get(self, name: str) -> Slot:
        slot = self._slots.get(name)
        if slot is None:
            raise SlotError("42704", f'replication slot "{name}" does not exist')
        return slot

    def _save(self) -> None:
        kept = [
            {k: v for k, v in asdict(s).items() if k != "active_pid"}
            for s in self._slots.values()
            if not s.temporary
        ]
        write_records(self._files, self._file, "slots", kept)


def check_name(name: str) -> None:
    """PostgreSQL's rule for slot names: lower case letters, digits, _; at most 63."""
    if not name:
        raise SlotError("42602", 'replication slot name "" is too short')
    if len(name) > MAX_NAME:
        raise SlotError("42602", f'replication slot name "{name}" is too long')
    if not _NAME.fullmatch(name):
        raise SlotError(
            "42602",
            f'replication slot name "{name}" contains invalid character; replication slot'
            " names may only contain lower case letters, numbers, and the underscore character",
        )


def check_replication_files(folder: Path) -> tuple[list[str], bool]:
    """`refimpl check`'s lines on the slots and publications files of a data folder (none
    for a file that is not there), and whether they are sound."""
    lines: list[str] = []
    ok = True
    for name, what, load in (
        (SLOTS_FILE, "replication slots", lambda: len(SlotStore(folder, REAL_FILES).all())),
        (PUBLICATIONS_FILE, "publications", lambda: PublicationStore(folder, REAL_FILES).count()),
    ):
        if not (folder / name).exists():
            continue
        try:
            lines.append(f"{what}: {load()} in {name}")
        except StorageError as error:
            ok = False
            lines.append(f"{what}: {error.message}")
    return lines, ok
