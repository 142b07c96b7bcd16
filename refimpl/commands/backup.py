"""`refimpl backup` and `refimpl restore`: a data folder's databases copied at one LSN each
while a server may run on it, and brought back into a new or empty data folder.

A backup holds every database (`refimpl.engine.storage.backup` says how each copy is
consistent without the server's locks), the access file (users, hashed tokens, grants) and
`kdb.conf`; not the browser sessions, the admin token file or the lock. A restore refuses a
folder in use (its lock is held) or one that holds anything, checks the manifest's names
against what a backup holds and the backup's files against its manifest first (so it writes
nothing outside the data folder, and nothing at all for a backup that fails), and puts every
database on a new timeline of LSNs (`storage.restore`).
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from refimpl.engine.instance import check_database_name, lock_folder
from refimpl.engine.storage.backup import (
    DatabaseCopy,
    Manifest,
    copy_database,
    copy_plain_file,
    read_manifest,
    verify_files,
    write_manifest,
)
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, WAL_FOLDER
from refimpl.engine.storage.restore import restore_database, timeline_base
from refimpl.errors import InvalidValue, StorageError

# Files of a data folder beside its databases that a backup keeps (a restore brings them back).
# Not the replication slots: a restore puts every database on a new timeline of LSNs, where
# no position a slot confirmed names a place (spec: replication, as PostgreSQL's backups).
KEPT_FILES = ("access.json", "kdb.conf", "publications.json")
_LOCK = ".lock"
# The name of a database's checkpoint or log segment: never '.', '..' or a hidden file.
_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


def backup_data_folder(data: Path, dest: Path) -> str:
    """Back up every database of the data folder `data` into the new folder `dest`; the
    report, a line per database. StorageError for a folder that is not one, or a `dest`
    that holds anything."""
    if not data.is_dir():
        raise StorageError(f"{data} is not a data folder")
    _refuse_filled(dest, "back up into")
    dest.mkdir(parents=True, exist_ok=True)
    copies: list[DatabaseCopy] = []
    for folder in sorted(data.iterdir()):
        # A folder a DROP DATABASE is removing starts with '.'.
        if folder.is_dir() and not folder.name.startswith(".") and (folder / WAL_FOLDER).is_dir():
            copies.append(copy_database(folder, dest / folder.name, folder.name))
    others = {
        name: copy_plain_file(data / name, dest / name)
        for name in KEPT_FILES
        if (data / name).is_file()
    }
    manifest = write_manifest(dest, copies, others)
    lines = [f"backup of {data} in {dest}, taken at {manifest.taken_at}:"]
    lines += [f"  database '{c.name}' at LSN {c.lsn} ({len(c.files)} file(s))" for c in copies]
    return "\n".join(lines)


def restore_data_folder(backup: Path, data: Path) -> str:
    """Restore the backup in `backup` into the data folder `data` (new, or empty); the
    report. Every database starts a new timeline; nothing is left half restored."""
    manifest = read_manifest(backup)
    problems = _listing_problems(manifest) or verify_files(backup, manifest)
    if problems:
        raise StorageError(
            f"the backup in {backup} is damaged ({'; '.join(problems)}); nothing was restored"
        )
    data.mkdir(parents=True, exist_ok=True)
    with lock_folder(data):  # never into a folder a server uses
        _refuse_filled(data, "restore into", allowed=(_LOCK,))
        now = time.time_ns() // 1000
        restored = []
        try:
            for copy in manifest.databases.values():
                base = timeline_base(copy.lsn, now)
                restored.append(restore_database(copy, backup, data / copy.name, base))
            for name in manifest.files:
                copy_plain_file(backup / name, data / name)
        except BaseException:
            for child in data.iterdir():
                if child.name != _LOCK:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            raise
    lines = [f"restored {backup} (taken at {manifest.taken_at}) into {data}:"]
    lines += [
        f"  database '{r.name}': the state at LSN {r.backup_lsn}; a new timeline, its next"
        f" commit is LSN {r.base_lsn + 1}"
        for r in restored
    ]
    return "\n".join(lines)


def _listing_problems(manifest: Manifest) -> list[str]:
    """What in the manifest's names a backup never holds, as sentences (none: sound).

    A backup written by `backup_data_folder` names databases by the database name rule,
    their files `<database>/checkpoints/<file>` or `<database>/wal/<file>`, and beside them
    only KEPT_FILES. Checked before anything is read or written: a crafted manifest naming
    `../x` would otherwise make the restore write outside the data folder.
    """
    problems = []
    seen: set[str] = set()
    for name, copy in sorted(manifest.databases.items()):
        try:
            check_database_name(name)
        except InvalidValue:
            problems.append(f"{name!r} is not a database name")
            continue
        if name.lower() in seen:
            problems.append(f"the database '{name}' is named twice")
        seen.add(name.lower())
        for relative in sorted(copy.files):
            parts = relative.split("/")
            if not (
                len(parts) == 3
                and parts[0] == name
                and parts[1] in (CHECKPOINT_FOLDER, WAL_FOLDER)
                and _FILE_NAME.fullmatch(parts[2])
            ):
                problems.append(
                    f"{relative!r} is not a file of database '{name}' (<database>/"
                    f"{CHECKPOINT_FOLDER}/<file> or <database>/{WAL_FOLDER}/<file>)"
                )
    problems += [
        f"{name!r} is not a file a backup keeps ({', '.join(KEPT_FILES)})"
        for name in sorted(manifest.files)
        if name not in KEPT_FILES
    ]
    return problems


def _refuse_filled(folder: Path, doing: str, allowed: tuple[str, ...] = ()) -> None:
    if folder.exists() and not folder.is_dir():
        raise StorageError(f"cannot {doing} {folder}: it is a file; name a new or empty folder")
    if folder.is_dir() and any(child.name not in allowed for child in folder.iterdir()):
        raise StorageError(
            f"cannot {doing} {folder}: the folder holds files already; name a new or empty folder"
        )
