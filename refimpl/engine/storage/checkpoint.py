"""Checkpoints: the state of a database's tables as of one LSN, in one data file.

A checkpoint file `checkpoint-<lsn>.kdb` is written atomically: a temporary file, fsync,
rename, fsync of the folder. Its body is MessagePack framed by a magic word, its length and a
CRC, so a damaged file is recognised rather than half-loaded. Older checkpoint files are
removed only after a newer one is durable. A write that fails (a full disk, say) removes its
temporary file and raises `StorageError`: the latest checkpoint stays the one before, and the
log still holds every commit since it, so nothing is lost and nothing changed.

A table's rows are stored in chunks of at most `CHUNK_ROWS` rows in table order (`Chunk`),
each encoded on its own and stored with its row count, the identity of its last row and the
characters of its text values (what they count towards `memory_mb`). So a reopen can take a
table's chunks as they are and decode each one only when a statement first touches it
(`Table.load_image`), with no Python object per row made at the open. Files of the first
format (`KDBCKPT1`, a table's rows in one list) are still read."""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import msgspec

from refimpl.engine.files import REAL_FILES, FileOps, write_all
from refimpl.errors import CorruptCheckpoint, StorageError

log = logging.getLogger(__name__)

MAGIC = b"KDBCKPT2"
_MAGIC_ROWS = b"KDBCKPT1"  # the first format: a table's rows in one list
_HEADER = struct.Struct("<8sQI")  # magic, body length, CRC32 of the body
PREFIX, SUFFIX = "checkpoint-", ".kdb"


# Rows a chunk holds: half a block of `blocks`, so that a decoded chunk is a block with room
# for inserts before it splits.
CHUNK_ROWS = 1024


class Chunk(msgspec.Struct, array_like=True, frozen=True):
    """Rows of a table, in table order, encoded on their own: `count` rows, the identity of
    the last (`last`, a list), the characters of their text values (`text`), and `payload`,
    the MessagePack of `[rows, rowids]` (rowids null for a keyed table)."""

    count: int
    last: list[Any]
    text: int
    payload: bytes


_payload_decoder = msgspec.msgpack.Decoder(tuple[list[tuple], list[int] | None])


def decode_chunk(payload: bytes) -> tuple[list[tuple], list[int] | None]:
    """A chunk's rows (as tuples) and row ids (None for a keyed table)."""
    return _payload_decoder.decode(payload)


class TableImage:
    """One table in a checkpoint: its CREATE TABLE text, row id counter and rows.

    Made from rows (`of_rows`, what a checkpoint takes), the rows are encoded into chunks at
    once; read from a file, `chunks` are as stored and `rows`/`rowids` are decoded from them
    at first use (a file of the first format has rows and no chunks)."""

    __slots__ = ("create", "next_rowid", "chunks", "_rows", "_rowids")

    def __init__(
        self,
        create: str,
        next_rowid: int,
        chunks: list[Chunk] | None,
        rows: list[Any] | None = None,
        rowids: list[int] | None = None,
    ) -> None:
        self.create = create
        self.next_rowid = next_rowid
        self.chunks = chunks
        self._rows = rows
        self._rowids = rowids

    @classmethod
    def of_rows(
        cls,
        create: str,
        next_rowid: int,
        rows: list[Any],
        rowids: list[int] | None,
        key_positions: Sequence[int],
        text_positions: Sequence[int],
    ) -> TableImage:
        """The image of these rows (in table order; `rowids` for a table without key), with
        the positions of its key columns and of its text columns (STRING, SYMBOL)."""
        chunks = _encoded(rows, rowids, key_positions, text_positions)
        return cls(create, next_rowid, chunks, rows, rowids)

    @classmethod
    def of_parts(
        cls,
        create: str,
        next_rowid: int,
        parts: Iterable[tuple[Any, list[tuple[Any, ...]], Iterable[Any]]],
        keyed: bool,
        key_positions: Sequence[int],
        text_positions: Sequence[int],
    ) -> TableImage:
        """The image of a table whose order key is its identity, from its blocks in order:
        each `(chunk, keys, rows)`, `chunk` the `Chunk` of a block still encoded as a
        checkpoint stored it (taken as it is, not decoded), else None with the block's keys
        and rows."""
        chunks: list[Chunk] = []
        rows: list[Any] = []
        rowids: list[int] | None = None if keyed else []
        for chunk, keys, some in parts:
            if chunk is None:
                rows += some
                if rowids is not None:
                    rowids += map(itemgetter(0), keys)
                continue
            chunks += _encoded(rows, rowids, key_positions, text_positions)
            chunks.append(chunk)
            rows, rowids = [], None if keyed else []
        chunks += _encoded(rows, rowids, key_positions, text_positions)
        return cls(create, next_rowid, chunks)

    @property
    def rows(self) -> list[Any]:
        """Every row, in table order (decoded from the chunks at the first use)."""
        if self._rows is None:
            self._decode()
        assert self._rows is not None
        return self._rows

    @property
    def rowids(self) -> list[int] | None:
        """Each row's id for a table without key, else None."""
        if self._rows is None:
            self._decode()
        return self._rowids

    def _decode(self) -> None:
        rows: list[Any] = []
        rowids: list[int] | None = None
        for chunk in self.chunks or ():
            some, ids = decode_chunk(chunk.payload)
            rows += some
            if ids is not None:
                rowids = rowids or []
                rowids += ids
        self._rows, self._rowids = rows, rowids


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
            "tables": [[t.create, t.next_rowid, _chunks_of(t)] for t in image.tables],
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
    if magic not in (MAGIC, _MAGIC_ROWS):
        raise CorruptCheckpoint(f"{path} is not a refimpl checkpoint file")
    if len(body) != length or zlib.crc32(body) != crc:
        raise CorruptCheckpoint(
            f"checkpoint {path} is damaged (length or CRC mismatch); restore from a backup"
        )
    try:
        if magic == _MAGIC_ROWS:
            first = _rows_decoder.decode(body)
            tables = [
                TableImage(t.create, t.next_rowid, None, t.rows, t.rowids) for t in first.tables
            ]
            return CheckpointImage(first.lsn, first.settings, tables)
        raw = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise CorruptCheckpoint(f"checkpoint {path} cannot be read ({exc})") from exc
    tables = [TableImage(t.create, t.next_rowid, t.chunks) for t in raw.tables]
    return CheckpointImage(raw.lsn, raw.settings, tables)


def _encoded(
    rows: list[Any],
    rowids: list[int] | None,
    key_positions: Sequence[int],
    text_positions: Sequence[int],
) -> list[Chunk]:
    """Rows in table order (and their ids, for a table without key) as chunks."""
    chunks = []
    key_of = itemgetter(*key_positions) if key_positions else None
    for start in range(0, len(rows), CHUNK_ROWS):
        some = rows[start : start + CHUNK_ROWS]
        ids = None if rowids is None else rowids[start : start + CHUNK_ROWS]
        if ids is not None:
            last = [ids[-1]]
        else:
            assert key_of is not None  # a keyed table's image names its key columns
            key = key_of(some[-1])
            last = list(key) if len(key_positions) > 1 else [key]
        text = sum(sum(map(len, filter(None, map(itemgetter(p), some)))) for p in text_positions)
        chunks.append(Chunk(len(some), last, text, _encoder.encode([some, ids])))
    return chunks


def _chunks_of(image: TableImage) -> list[Chunk]:
    if image.chunks is None:  # only a file of the first format's image has none
        raise ValueError("a table image read from a file of the first format cannot be written")
    return image.chunks


class _StoredTable(msgspec.Struct, array_like=True):
    """A table as `write` stores it."""

    create: str
    next_rowid: int
    chunks: list[Chunk]


class _Stored(msgspec.Struct):
    lsn: int
    settings: dict[str, Any]
    tables: list[_StoredTable]


class _RowsTable(msgspec.Struct, array_like=True):
    """A table as the first format stores it; rows come out as tuples, the form tables keep."""

    create: str
    next_rowid: int
    rows: list[tuple]
    rowids: list[int] | None


class _RowsStored(msgspec.Struct):
    lsn: int
    settings: dict[str, Any]
    tables: list[_RowsTable]


_decoder = msgspec.msgpack.Decoder(_Stored)
_rows_decoder = msgspec.msgpack.Decoder(_RowsStored)
_encoder = msgspec.msgpack.Encoder()


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
