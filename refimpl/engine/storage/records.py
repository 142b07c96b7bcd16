"""The log record of one committed transaction, and its encoding (MessagePack).

A record is `[committed_at, entries]`, `committed_at` in microseconds UTC. Each entry is
one of:

- `["u", table, columns, rows, rowids]`: rows after the change (an upsert), with the column
  names they were written with, so a reader maps them onto any later schema; `rowids` is
  null for a keyed table, else each row's id;
- `["d", table, [[partition, ident], ...]]`: deleted rows by partition and identity;
- `["ddl", table, text]`: a schema change of the table, as canonical SQL text;
- `["db", null, text]`: a change of the database itself (ALTER DATABASE ... SET).

Everything the change stream needs is in the record: it reads the log, never the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()

UPSERT, DELETE, DDL, DATABASE = "u", "d", "ddl", "db"


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    table: str | None
    payload: tuple[Any, ...]

    @classmethod
    def upsert(
        cls, table: str, columns: Sequence[str], rows: list[tuple], rowids: list[int] | None
    ) -> Entry:
        return cls(UPSERT, table, (list(columns), rows, rowids))

    @classmethod
    def delete(cls, table: str, keys: list[tuple[tuple, tuple]]) -> Entry:
        return cls(DELETE, table, (keys,))

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


def encode(committed_at: int, entries: list[Entry]) -> bytes:
    return _encoder.encode([committed_at, [[e.kind, e.table, *e.payload] for e in entries]])


def decode(lsn: int, payload: bytes) -> Record:
    committed_at, raw_entries = _decoder.decode(payload)
    entries = [Entry(raw[0], raw[1], tuple(raw[2:])) for raw in raw_entries]
    return Record(lsn, committed_at, entries)
