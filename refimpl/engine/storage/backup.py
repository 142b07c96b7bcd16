"""Backups: a consistent copy of a database's files at one LSN, taken while writes go on.

How the copy is consistent without any lock of the server (so that `refimpl backup` works
from another process, and `BACKUP DATABASE` never holds the write lock for the copy's
length): a checkpoint file never changes once it has its name, a sealed log segment never
changes, and the last segment only grows. So the copy takes the newest checkpoint (LSN C),
then every log segment from the one holding LSN C + 1 on, and cuts the copy of the last one
after its last whole valid frame (a frame still being written is left out), or after
`upto_lsn` when the caller knows what is durable. The checkpoint and the log from C + 1 to the
cut are, replayed, exactly the state at the cut's LSN (the backup's LSN). A checkpoint or
segment that a newer checkpoint removed while the copy ran makes it start over (a few times).

A backup folder holds `<database>/checkpoints/` and `<database>/wal/` as a data folder does
(so `refimpl check` reads it as one) and `backup.json`, the manifest: when it was taken, and
per database its LSN, its checkpoint's LSN and the size and CRC32 of every file, so that a
file damaged or cut short later is found.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from refimpl.engine.files import REAL_FILES, FileOps, write_all
from refimpl.engine.storage import checkpoint
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, WAL_FOLDER
from refimpl.engine.storage.wal_segments import (
    HEADER,
    HEADER_SIZE,
    find_valid_frame,
    list_segments,
    parse_segment_name,
    scan_segments,
    valid_end,
)
from refimpl.errors import StorageError

MANIFEST = "backup.json"
FORMAT = "refimpl-backup-1"
_ATTEMPTS = 5
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class DatabaseCopy:
    """One database in a backup: the LSN it holds, its checkpoint's, and its files (paths
    relative to the backup folder -> (bytes, CRC32))."""

    name: str
    lsn: int
    checkpoint_lsn: int
    files: dict[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Manifest:
    """What `backup.json` says of a backup."""

    taken_at: str
    databases: dict[str, DatabaseCopy]
    files: dict[str, tuple[int, int]]  # files beside the databases (the access file, say)


class _Moved(Exception):
    """A file the copy needed was removed meanwhile (a newer checkpoint trimmed the log)."""


def copy_database(
    source: Path,
    target: Path,
    name: str,
    *,
    upto_lsn: int | None = None,
    files: FileOps = REAL_FILES,
) -> DatabaseCopy:
    """Copy the database in folder `source` into the new folder `target` at one LSN.

    `target`'s name is the database's folder in the backup; its parent is the backup folder.
    StorageError when the source is damaged, or moves faster than the copy five times over.
    """
    for _attempt in range(_ATTEMPTS):
        if target.exists():
            shutil.rmtree(target)
        try:
            return _copy_once(source, target, name, upto_lsn, files)
        except _Moved:
            continue
    raise StorageError(
        f"database '{name}' could not be copied: its log moved on faster than the copy"
        f" {_ATTEMPTS} times (a very small WAL_ARCHIVE?); try again"
    )


def _copy_once(
    source: Path, target: Path, name: str, upto_lsn: int | None, files: FileOps
) -> DatabaseCopy:
    checkpoints = checkpoint.list_checkpoints(source / CHECKPOINT_FOLDER)
    checkpoint_lsn, checkpoint_file = checkpoints[-1] if checkpoints else (0, None)
    wal = source / WAL_FOLDER
    segments = list_segments(wal) if wal.is_dir() else []
    needed = [(first, path) for first, path in segments if first <= checkpoint_lsn + 1]
    start = segments.index(needed[-1]) if needed else 0
    if segments and segments[start][0] > checkpoint_lsn + 1:
        raise _Moved  # the segment after the checkpoint is gone: a newer checkpoint is there
    copied: dict[str, tuple[int, int]] = {}
    root = target.parent
    files.mkdir(target / CHECKPOINT_FOLDER)
    files.mkdir(target / WAL_FOLDER)
    if checkpoint_file is not None:
        out = target / CHECKPOINT_FOLDER / checkpoint_file.name
        copied[_relative(out, root)] = _copy_file(checkpoint_file, out, files)
    chosen = segments[start:]
    for k, (_first, path) in enumerate(chosen):
        last = k == len(chosen) - 1
        out = target / WAL_FOLDER / path.name
        _copy_file(path, out, files)
        if last:
            _cut_to_whole_frames(out, files)
    if upto_lsn is not None:
        _cut_after(target / WAL_FOLDER, upto_lsn, files)
    result = scan_segments(list_segments(target / WAL_FOLDER))
    if result.damage is not None:
        damage = result.damage
        raise StorageError(
            f"database '{name}' was not backed up: its log is damaged in {damage.path.name} at"
            f" offset {damage.offset} ({damage.reason}); run `refimpl check` on the data folder"
        )
    lsn = max(checkpoint_lsn, result.segments[-1].last_lsn if result.segments else 0)
    for path in sorted((target / WAL_FOLDER).iterdir()):
        copied[_relative(path, root)] = _size_and_crc(path)
    for folder in (target / CHECKPOINT_FOLDER, target / WAL_FOLDER, target):
        files.sync_directory(folder)
    return DatabaseCopy(name, lsn, checkpoint_lsn, copied)


def copy_plain_file(source: Path, target: Path, files: FileOps = REAL_FILES) -> tuple[int, int]:
    """Copy a file that is replaced whole when it changes (the access file): (bytes, CRC32)."""
    try:
        return _copy_file(source, target, files)
    except _Moved:
        raise StorageError(f"{source} vanished while it was copied; try again") from None


def _copy_file(source: Path, target: Path, files: FileOps) -> tuple[int, int]:
    """Copy what `source` holds now durably; (bytes, CRC32). _Moved when it is gone."""
    try:
        reader = source.open("rb")
    except FileNotFoundError:
        raise _Moved from None
    crc = total = 0
    fd = files.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with reader:
            while chunk := reader.read(_CHUNK):
                write_all(files, fd, chunk)
                crc = zlib.crc32(chunk, crc)
                total += len(chunk)
        files.fsync(fd)
    finally:
        files.close(fd)
    return total, crc


def _cut_to_whole_frames(path: Path, files: FileOps) -> None:
    """Cut a copied last segment after its last valid frame when zeros follow it or no valid
    frame does: what follows is then a frame being written as the copy read it (cut short,
    or over zeros written ahead of the log, `wal_zeros`, not yet all overwritten), or zeros
    the copy read before frames were written over them (it reads the file in pieces, and
    frames after zeros were appended while it read on). Otherwise a valid frame after a bad
    one is damage, left for the scan that follows to report."""
    data = path.read_bytes()
    first_lsn = parse_segment_name(path.name)
    assert first_lsn is not None  # a name `list_segments` gave
    end, last_lsn = valid_end(data, first_lsn)
    header = data[end : end + HEADER_SIZE]
    if end < len(data) and (
        header.count(0) == len(header) or find_valid_frame(data, end + 1, last_lsn) is None
    ):
        files.truncate(path, end)


def _cut_after(folder: Path, lsn: int, files: FileOps) -> None:
    """Remove the records after `lsn` from the copied log in `folder`."""
    for first, path in list_segments(folder):
        if first > lsn + 1:
            files.unlink(path)
            continue
        # A segment that begins right after `lsn` is cut to nothing but kept: the log then
        # still says where it goes on.
        data = path.read_bytes()
        offset, current = 0, first - 1
        while offset + HEADER_SIZE <= len(data) and current < lsn:
            offset += HEADER_SIZE + HEADER.unpack_from(data, offset)[0]
            current += 1
        if offset < len(data):
            files.truncate(path, offset)


def _size_and_crc(path: Path) -> tuple[int, int]:
    crc = total = 0
    with path.open("rb") as reader:
        while chunk := reader.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            total += len(chunk)
    return total, crc


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


# -- the manifest ------------------------------------------------------------------------


def write_manifest(
    folder: Path,
    databases: list[DatabaseCopy],
    others: dict[str, tuple[int, int]] | None = None,
    files: FileOps = REAL_FILES,
) -> Manifest:
    """Write `backup.json` durably, last: a backup without it is not finished."""
    taken_at = datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="seconds")
    manifest = Manifest(
        taken_at.replace("+00:00", "Z"), {d.name: d for d in databases}, dict(others or {})
    )
    body: dict[str, Any] = {
        "format": FORMAT,
        "taken_at": manifest.taken_at,
        "databases": {
            d.name: {"lsn": d.lsn, "checkpoint_lsn": d.checkpoint_lsn, "files": _listed(d.files)}
            for d in databases
        },
        "files": _listed(manifest.files),
    }
    temporary = folder / (MANIFEST + ".tmp")
    fd = files.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(files, fd, json.dumps(body, indent=1).encode())
        files.fsync(fd)
    finally:
        files.close(fd)
    files.replace(temporary, folder / MANIFEST)
    files.sync_directory(folder)
    return manifest


def _listed(found: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {path: {"bytes": size, "crc32": crc} for path, (size, crc) in sorted(found.items())}


def is_backup(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the backup in `folder`; StorageError when it is missing or unreadable."""
    try:
        body = json.loads((folder / MANIFEST).read_text("utf-8"))
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}, not {FORMAT!r}")
        databases = {
            name: DatabaseCopy(
                name, int(entry["lsn"]), int(entry["checkpoint_lsn"]), _unlisted(entry["files"])
            )
            for name, entry in body["databases"].items()
        }
        return Manifest(str(body["taken_at"]), databases, _unlisted(body.get("files", {})))
    except FileNotFoundError:
        raise StorageError(f"{folder} is not a backup: it has no {MANIFEST}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StorageError(f"the manifest {folder / MANIFEST} cannot be read ({exc})") from None


def _unlisted(listed: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {path: (int(entry["bytes"]), int(entry["crc32"])) for path, entry in listed.items()}


def verify_files(folder: Path, manifest: Manifest) -> list[str]:
    """What differs between the backup's files and its manifest, as sentences (none: sound)."""
    problems = []
    listed = dict(manifest.files)
    for database in manifest.databases.values():
        listed.update(database.files)
    for relative, (size, crc) in sorted(listed.items()):
        path = folder / relative
        if path.is_symlink():  # a backup's files are its own, never another's they point to
            problems.append(f"{relative} is a symbolic link, not a file of the backup")
            continue
        if not path.is_file():
            problems.append(f"{relative} is missing")
            continue
        found_size, found_crc = _size_and_crc(path)
        if found_size != size:
            problems.append(f"{relative} holds {found_size} bytes, not the {size} of the backup")
        elif found_crc != crc:
            problems.append(f"{relative} is damaged: its CRC32 differs from the manifest's")
    return problems


def check_backup(folder: Path, last_lsns: dict[str, int]) -> tuple[list[str], bool]:
    """What `refimpl check` adds for a backup: its manifest against its files, and each
    database's LSN against what its checkpoint and log hold (`last_lsns`, by name)."""
    try:
        manifest = read_manifest(folder)
    except StorageError as error:
        return [f"backup: {error.message}"], False
    lines = [f"backup: taken at {manifest.taken_at}"]
    problems = verify_files(folder, manifest)
    for name, copy in sorted(manifest.databases.items()):
        held = last_lsns.get(name, 0)
        if held != copy.lsn:
            problems.append(f"database '{name}' holds LSN {held}, not the backup's {copy.lsn}")
        else:
            lines.append(f"backup: database '{name}' at LSN {copy.lsn}")
    lines += [f"backup: {problem}" for problem in problems]
    return lines, not problems
