"""Restore: a database of a backup brought back into a data folder, on a new timeline of LSNs.

A timeline is a range of LSNs, and a position names its timeline by lying in its range. A
database counts its LSNs from 1. A restored database goes on from the state at the backup's
LSN B, but its commits cannot take B + 1, B + 2, ...: the database the backup came from may
have gone on past B, and a reader of it holding such a position would be handed other
transactions under the same numbers, skipping some without a word. So a restored database
starts a new timeline at its **base**, the microseconds since 1970 at the restore (and at
least B): its first commit gets LSN base + 1. No timeline reaches the base of a later one,
since no database commits once a microsecond for long.

The restored log holds no record from before the restore: the state at B becomes the
restored database's checkpoint, labelled with the base. Every position before the base is
then gone (410 from the change stream, `reset` from the event stream), and a reader starts
over from a fresh copy of the table, as after any 410. The timeline is kept in the
database's settings (`timeline`: base, the backup's LSN, when), so /api/stats can show it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine.files import REAL_FILES, FileOps
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage import checkpoint
from refimpl.engine.storage.backup import DatabaseCopy, copy_plain_file
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, WAL_FOLDER, Database
from refimpl.engine.storage.wal_segments import segment_name
from refimpl.errors import StorageError


@dataclass(frozen=True, slots=True)
class Restored:
    """A database restored: the backup's LSN and the base of its new timeline."""

    name: str
    backup_lsn: int
    base_lsn: int


def timeline_base(backup_lsn: int, now_us: int | None = None) -> int:
    """The base of a new timeline for a restore of a backup at `backup_lsn`, now."""
    moment = time.time_ns() // 1000 if now_us is None else now_us
    return max(moment, backup_lsn)


def restore_database(
    copy: DatabaseCopy, backup: Path, target: Path, base_lsn: int, files: FileOps = REAL_FILES
) -> Restored:
    """Bring the database `copy` of the backup folder `backup` into the new folder `target`:
    the files its manifest lists, each `<database>/checkpoints/<file>` or
    `<database>/wal/<file>` (the caller checks the names, `refimpl.commands.backup`).

    The copy is replayed to the backup's LSN (recovery itself), then its state is written
    as the one checkpoint, at `base_lsn`, beside an empty log that goes on at `base_lsn + 1`.
    StorageError when the backup's files do not hold the backup's LSN.
    """
    for kind in (CHECKPOINT_FOLDER, WAL_FOLDER):
        files.mkdir(target / kind)
    # Only the files the manifest lists (and a caller checked): `<name>/<folder>/<file>`.
    for relative in sorted(copy.files):
        _, kind, name = relative.split("/")
        copy_plain_file(backup / relative, target / kind / name, files)
    database = Database.open(copy.name, target, EngineOptions(), files=files)
    try:
        if database.applied_lsn != copy.lsn:
            raise StorageError(
                f"the backup of database '{copy.name}' holds its state up to LSN"
                f" {database.applied_lsn}, not the LSN {copy.lsn} its manifest names; run"
                " `refimpl check` on the backup"
            )
        image = database.image()
    finally:
        database.close()
    settings = dict(image.settings)
    settings["timeline"] = {
        "base_lsn": base_lsn,
        "backup_lsn": copy.lsn,
        "restored_at_us": time.time_ns() // 1000,
    }
    for folder in (CHECKPOINT_FOLDER, WAL_FOLDER):
        for path in list((target / folder).iterdir()):
            files.unlink(path)
    checkpoint.write(
        target / CHECKPOINT_FOLDER,
        checkpoint.CheckpointImage(base_lsn, settings, image.tables),
        files,
    )
    # An empty segment named for the next LSN: the log is empty and goes on at base + 1.
    fd = files.open(
        target / WAL_FOLDER / segment_name(base_lsn + 1), os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    )
    try:
        files.fsync(fd)
    finally:
        files.close(fd)
    for written in (target / WAL_FOLDER, target / CHECKPOINT_FOLDER, target):
        files.sync_directory(written)
    return Restored(copy.name, copy.lsn, base_lsn)
