"""Checkpoints: the state of a database's tables as of one LSN, in one data file.

A checkpoint file `checkpoint-<lsn>.kdb` is written atomically: a temporary file, fsync,
rename, fsync of the folder. Its body is MessagePack framed by a magic word, its length and a
CRC, so a damaged file is recognised rather than half-loaded. Older checkpoint files are
removed only after a newer one is durable.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from refimpl.errors import CorruptCheckpoint

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


def write(folder: Path, image: CheckpointImage) -> Path:
    """Write a checkpoint atomically and durably; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    body = msgspec.msgpack.encode(
        {
            "lsn": image.lsn,
            "settings": image.settings,
            "tables": [
                [t.create, t.next_rowid, t.rows, t.rowids] for t in image.tables
            ],
        }
    )
    header = _HEADER.pack(MAGIC, len(body), zlib.crc32(body))
    final = folder / file_name(image.lsn)
    temporary = folder / (final.name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(header)
        file.write(body)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, final)
    sync_folder(folder)
    return final


def read(path: Path) -> CheckpointImage:
    """Load one checkpoint file; CorruptCheckpoint naming the file when it is damaged."""
    data = path.read_bytes()
    if len(data) < _HEADER.size:
        raise CorruptCheckpoint(f"checkpoint {path} is truncated ({len(data)} bytes)")
    magic, length, crc = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    if magic != MAGIC:
        raise CorruptCheckpoint(f"{path} is not a refimpl checkpoint file")
    if len(body) != length or zlib.crc32(body) != crc:
        raise CorruptCheckpoint(
            f"checkpoint {path} is damaged (length or CRC mismatch); restore from a backup"
        )
    raw = msgspec.msgpack.decode(body)
    tables = [TableImage(t[0], t[1], t[2], t[3]) for t in raw["tables"]]
    return CheckpointImage(raw["lsn"], raw["settings"], tables)


def remove_older(folder: Path, keep_lsn: int) -> None:
    """Remove checkpoint files older than `keep_lsn`, and leftover temporary files."""
    for lsn, path in list_checkpoints(folder):
        if lsn < keep_lsn:
            path.unlink(missing_ok=True)
    for path in folder.glob(f"{PREFIX}*{SUFFIX}.tmp"):
        path.unlink(missing_ok=True)
    sync_folder(folder)


def sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
