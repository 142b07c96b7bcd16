"""The log record of one committed transaction, and its encoding (MessagePack).

A record is `[committed_at, entries]`, `committed_at` in microseconds UTC. Each entry is
one of:

- `["u", table, columns, rows, rowids]`: rows after the change (an upsert), with the column
  names they were written with, so a reader maps them onto any later schema; `rowids` is
  null for a keyed table, else each row's id;
- `["d", table, [[partition, ident], ...]]`: deleted rows by partition and identity;
- on a table with before-images (`REPLICA IDENTITY FULL`) an upsert entry has one more item,
  the row before each change (null for an insert), on the entry's columns:
  `["u", table, columns, rows, rowids, old_rows]`; a delete entry has two more, the deleted
  rows and their columns: `["d", table, keys, columns, old_rows]`. Other tables' entries
  are exactly as above (nothing extra is written);
- `["ddl", table, text]`: a schema change of the table, as canonical SQL text;
- `["db", null, text]`: a change of the database itself (ALTER DATABASE ... SET).

Everything the change stream needs is in the record: it reads the log, never the tables.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()

UPSERT, DELETE, DDL, DATABASE = "u", "d", "ddl", "db"


# How many items an entry of each kind has before its before-images (when it has them).
_PLAIN_LENGTH = {UPSERT: 5, DELETE: 3}


@dataclass(frozen=True, slots=True)
class Before:
    """The rows before the changes of one entry, on `columns` (None: inserted rows)."""

    columns: list[str]
    rows: list[Any]


class Entry(NamedTuple):
    """One entry of a record (a named tuple: made at every commit, and a frozen
    dataclass's fields cost a Python call each to set)."""

    kind: str
    table: str | None
    payload: tuple[Any, ...]
    before: Before | None = None  # only on tables with before-images

    @classmethod
    def upsert(
        cls,
        table: str,
        columns: Sequence[str],
        rows: list[tuple],
        rowids: list[int] | None,
        old_rows: list[tuple | None] | None = None,
    ) -> Entry:
        before = None if old_rows is None else Before(list(columns), old_rows)
        return cls(UPSERT, table, (list(columns), rows, rowids), before)

    @classmethod
    def delete(
        cls,
        table: str,
        keys: list[tuple[tuple, tuple]],
        before: tuple[Sequence[str], list[tuple]] | None = None,
    ) -> Entry:
        old = None if before is None else Before(list(before[0]), before[1])
        return cls(DELETE, table, (keys,), old)

    @classmethod
    def ddl(cls, table: str, text: str) -> Entry:
        return cls(DDL, table, (text,))

    @classmethod
    def database(cls, text: str) -> Entry:
        return cls(DATABASE, None, (text,))


@dataclass(frozen=True, slots=True)
class Record:
    lsn: int
    committed_at: int
    entries: list[Entry]


def _raw(entry: Entry) -> list[Any]:
    raw = [entry.kind, entry.table, *entry.payload]
    before = entry.before
    if before is not None:
        raw += [before.rows] if entry.kind == UPSERT else [before.columns, before.rows]
    return raw


def encode(committed_at: int, entries: list[Entry]) -> bytes:
    return _encoder.encode([committed_at, [_raw(e) for e in entries]])


def encode_upsert(
    committed_at: int,
    table: str,
    columns: Sequence[str],
    rows: list[tuple],
    rowids: list[int] | None,
    old_rows: list[tuple | None] | None = None,
) -> bytes:
    """`encode(committed_at, [Entry.upsert(table, columns, rows, rowids, old_rows)])`: the
    same bytes, without the entry made and taken apart again (a one-row INSERT's record)."""
    raw: list[Any] = [UPSERT, table, columns, rows, rowids]  # a tuple is an array as a list is
    if old_rows is not None:
        raw.append(old_rows)
    return _encoder.encode([committed_at, [raw]])


# A record prepared before its commit time is known holds this in its place: a uint64, as
# every time since 1970-01-01 01:11:35 is, so the time is written over it in place.
_UNSTAMPED = 2**64 - 1
_STAMP_AT = 2  # after the array's marker and the uint64's
_UINT64 = 0xCF


def encode_unstamped(entries: list[Entry]) -> bytearray:
    """The record of `entries` before its commit time is known (a bulk load encodes its
    rows before it takes the write lock); `stamp` then writes the time in."""
    record = bytearray()  # encoded into: no second copy of a large record
    _encoder.encode_into([_UNSTAMPED, [_raw(e) for e in entries]], record)
    assert record[_STAMP_AT - 1] == _UINT64  # the form the time is written in
    return record


STAMP_END = _STAMP_AT + 8  # the bytes of an unstamped record from here on never change


def stamp(record: bytearray, committed_at: int) -> bytearray:
    """`record` (from `encode_unstamped`) with its commit time: then a valid record, which
    decodes as `encode(committed_at, entries)` does."""
    struct.pack_into(">Q", record, _STAMP_AT, committed_at)
    return record


def _entry(raw: list[Any]) -> Entry:
    plain = _PLAIN_LENGTH.get(raw[0])
    if plain is None or len(raw) == plain:
        return Entry(raw[0], raw[1], tuple(raw[2:]))
    before = Before(raw[2], raw[5]) if raw[0] == UPSERT else Before(raw[3], raw[4])
    return Entry(raw[0], raw[1], tuple(raw[2:plain]), before)


def decode(lsn: int, payload: bytes) -> Record:
    committed_at, raw_entries = _decoder.decode(payload)
    return Record(lsn, committed_at, [_entry(raw) for raw in raw_entries])


def raw_decoder() -> Callable[[bytes | memoryview], list[Any]]:
    """What decodes a record into `[committed_at, entries]`, its entries as decoded lists in
    the shapes the module docstring gives, without the objects `decode` makes of them: for
    a loop over many records (replay) that spares itself a call per record."""
    return _decoder.decode


def entry_of(raw: list[Any]) -> Entry:
    """The `Entry` of one of the entries `raw_decoder` gives."""
    return _entry(raw)
