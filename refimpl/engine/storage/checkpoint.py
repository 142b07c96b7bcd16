"""Checkpoints: the state of a database's tables as of one LSN, in one data file.

A checkpoint file `checkpoint-<lsn>.kdb` is written atomically: a temporary file, fsync,
rename, fsync of the folder. Its body is MessagePack framed by a magic word, its length and a
CRC, so a damaged file is recognised rather than half-loaded. Older checkpoint files are
removed only after a newer one is durable. A write that fails (a full disk, say) removes its
temporary file and raises `StorageError`: the latest checkpoint stays the one before, and the
log still holds every commit since it, so nothing is lost and nothing changed.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from refimpl.engine.files import REAL_FILES, FileOps, write_all
from refimpl.errors import CorruptCheckpoint, StorageError

log = logging.getLogger(__name__)

MAGIC = b"KDBCKPT1"
_HEADER = struct.Struct("<8sQI")  # magic, body length, CRC32 of the body
PREFIX, SUFFIX = "checkpoint-", ".kdb"


@dataclass(slots=True)
class TableImage:
    """One table in a checkpoint: its CREATE TABLE text, row id counter and rows."""

    create: str
    next_rowid: int
    rows: list[Any]
    rowids: list[int] | None


@dataclass(slots=True)
class CheckpointImage:
    lsn: int
    settings: dict[str, Any]
    tables: list[TableImage]


def file_name(lsn: int) -> str:
    return f"{PREFIX}{lsn:020d}{SUFFIX}"


def lsn_of(path: Path) -> int | None:
    name = path.name
    if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
        return None
    digits = name[len(PREFIX) : -len(SUFFIX)]
    return int(digits) if digits.isdigit() else None


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(lsn, path) of every checkpoint file, oldest first."""
    if not folder.exists():
        return []
    found = []
    for path in folder.iterdir():
        lsn = lsn_of(path)
        if lsn is not None:
            found.append((lsn, path))
    return sorted(found)


def write(folder: Path, image: CheckpointImage, files: FileOps = REAL_FILES) -> Path:
    """Write a checkpoint atomically and durably; returns its path.

    Raises `StorageError` when the disk fails; the temporary file is then gone again.
    """
    body = msgspec.msgpack.encode(
        {
            "lsn": image.lsn,
            "settings": image.settings,
            "tables": [[t.create, t.next_rowid, t.rows, t.rowids] for t in image.tables],
        }
    )
    header = _HEADER.pack(MAGIC, len(body), zlib.crc32(body))
    final = folder / file_name(image.lsn)
    temporary = folder / (final.name + ".tmp")
    doing = f"create the folder {folder}"
    try:
        if files.mkdir(folder):
            # A new folder's name is durable only once its parent is synced; without it a
            # crash could lose the checkpoint after the log it covers was trimmed.
            files.sync_directory(folder.parent)
        doing = f"write {temporary}"
        fd = files.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(files, fd, header)
            write_all(files, fd, body)
            files.fsync(fd)
        finally:
            files.close(fd)
        doing = f"rename {temporary} to {final.name}"
        files.replace(temporary, final)
        doing = f"sync the folder {folder}"
        files.sync_directory(folder)
    except OSError as exc:
        try:
            files.unlink(temporary)
        except OSError:
            pass  # already renamed, never created, or the disk is gone: the next one retries
        raise StorageError(
            f"the checkpoint at LSN {image.lsn} could not be written: could not {doing}"
            f" ({exc}); nothing changed, the log still holds every commit; free disk space"
            " or check the disk, then run CHECKPOINT again"
        ) from exc
    return final


def read(path: Path) -> CheckpointImage:
    """Load one checkpoint file; CorruptCheckpoint naming the file when it is damaged."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StorageError(f"checkpoint {path} cannot be read ({exc}); check the disk") from exc
    if len(data) < _HEADER.size:
        raise CorruptCheckpoint(f"checkpoint {path} is truncated ({len(data)} bytes)")
    magic, length, crc = _HEADER.unpack_from(data)
    body = memoryview(data)[_HEADER.size :]  # not a second copy of a big file
    if magic != MAGIC:
        raise CorruptCheckpoint(f"{path} is not a refimpl checkpoint file")
    if len(body) != length or zlib.crc32(body) != crc:
        raise CorruptCheckpoint(
            f"checkpoint {path} is damaged (length or CRC mismatch); restore from a backup"
        )
    try:
        raw = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise CorruptCheckpoint(f"checkpoint {path} cannot be read ({exc})") from exc
    tables = [TableImage(t.create, t.next_rowid, t.rows, t.rowids) for t in raw.tables]
    return CheckpointImage(raw.lsn, raw.settings, tables)


class _StoredTable(msgspec.Struct, array_like=True):
    """A table as `write` stores it; rows come out as tuples, the form tables keep."""

    create: str
    next_rowid: int
    rows: list[tuple]
    rowids: list[int] | None


class _Stored(msgspec.Struct):
    lsn: int
    settings: dict[str, Any]
    tables: list[_StoredTable]


_decoder = msgspec.msgpack.Decoder(_Stored)


def remove_older(folder: Path, keep_lsn: int, files: FileOps = REAL_FILES) -> None:
    """Remove checkpoint files older than `keep_lsn`, and leftover temporary files.

    Only tidying: the checkpoint at `keep_lsn` is durable already, and recovery reads the
    newest file, so a failure here is logged and left to the next checkpoint.
    """
    doomed = [path for lsn, path in list_checkpoints(folder) if lsn < keep_lsn]
    doomed += folder.glob(f"{PREFIX}*{SUFFIX}.tmp")
    try:
        for path in doomed:
            try:
                files.unlink(path)
            except FileNotFoundError:
                pass
        files.sync_directory(folder)
    except OSError as exc:
        log.warning("older checkpoint files in %s stay for now: %s", folder, exc)
