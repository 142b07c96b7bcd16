"""The output plugins a logical slot streams with: `pgoutput` here, and `test_decoding`
(text, in `refimpl.engine.replication.test_decoding`, which SQL reads too).

A plugin turns one committed transaction into messages, each with the position a client
confirms once it has it (spec: replication): Begin at place 0, the n-th change shown at
place n, Commit at the transaction's end. `skip` leaves out the first changes of a
transaction a client had already confirmed (its Begin is sent again, so that the client's
decoder sees a whole transaction's frame). Types go out as PostgreSQL's built-in types
(`refimpl.pgwire.types`: INT int4, BIGINT int8, DOUBLE float8, STRING and SYMBOL text,
BOOLEAN bool, TIMESTAMP timestamptz), values in their text forms.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Protocol

from refimpl.engine import replication_positions as positions
from refimpl.engine.features.change_stream import UNLOGGED, Change
from refimpl.engine.replication.decoding import (
    DDL,
    DELETE,
    INSERT,
    TRUNCATE,
    UPDATE,
    Relation,
    Shown,
    Transaction,
    key_values,
    kind,
    old_row,
    statement,
)
from refimpl.engine.replication.test_decoding import (
    DDL_PREFIX,
    Message,
    TestDecoding,
    flag,
    xid_of,
)
from refimpl.errors import BadRequest
from refimpl.pgwire import types
from refimpl.pgwire.types import PG_EPOCH_MICROS

PLUGINS = ("pgoutput", "test_decoding")
_I8, _I16, _I32 = struct.Struct("!q"), struct.Struct("!h"), struct.Struct("!i")


class OutputPlugin(Protocol):
    # The publications whose tables the stream shows; None: every table its reader may read.
    publications: list[str] | None

    def transaction(self, txn: Transaction, skip: int) -> list[Message]:
        """The messages of `txn` after its first `skip` changes ([] for one not shown)."""


# -- pgoutput -----------------------------------------------------------------------------


class PgOutput:
    """PostgreSQL's logical replication protocol (protocol versions 1 to 4: a committed
    transaction is the same in each): Begin, Relation (before a table's first change on
    this connection and again when its shape changed), Insert, Update, Delete, Truncate,
    a Message ('M', prefix `kdb.ddl`) for any other DDL, Commit. Transactions that show no
    change are not sent (as PostgreSQL 15's pgoutput)."""

    def __init__(self, options: dict[str, str | None]) -> None:
        known = (
            "proto_version",
            "publication_names",
            "binary",
            "messages",
            "streaming",
            "two_phase",
            "origin",
        )
        for name in options:
            if name not in known:
                raise BadRequest(f"unrecognized pgoutput option: {name}")
        version_text = options.get("proto_version")
        if version_text is None:
            raise BadRequest("proto_version option missing")
        try:
            version = int(version_text)
        except ValueError:
            raise BadRequest(f'invalid proto_version "{version_text}"') from None
        if not 1 <= version <= 4:
            raise BadRequest(
                f"client sent proto_version={version} but server only supports protocol 1 to 4"
            )
        names = options.get("publication_names")
        if names is None:
            raise BadRequest("publication_names parameter missing")
        self.version = version
        self.publications: list[str] | None = _name_list(names)
        self.binary = flag(options, "binary", False)
        flag(options, "messages", False)
        self._sent: dict[int, Relation] = {}
        # Each relation's row encoder (by OID, with the shape it was made for), made once: a
        # row costs a call per value, no lookup.
        self._encoders: dict[int, tuple[Relation, Callable[[Sequence[Any]], bytes]]] = {}

    def transaction(self, txn: Transaction, skip: int) -> list[Message]:
        changes = txn.changes
        if not changes:
            return []
        lsn = txn.lsn
        base = positions.position(lsn, 0)
        end = positions.end_of(lsn)
        last_place = positions.LAST_PLACE
        sent_map = self._sent
        stamp = txn.committed_at - PG_EPOCH_MICROS
        out: list[Message] = [
            (
                positions.position(lsn, 0),
                b"B" + _I8.pack(end) + _I8.pack(stamp) + _I32.pack(xid_of(lsn)),
            )
        ]
        rest = changes[skip:]
        if _one_insert_run(rest):
            self._insert_run(rest, base, skip, out)
            rest = []
        for place, (relation, change) in enumerate(rest, skip + 1):
            at = base + (place if place < last_place else last_place)
            op = kind(change)
            sent = sent_map.get(relation.oid)
            if sent is relation:
                # the common case: shape known
                out.append((at, self._change(relation, change, op, at)))
                continue
            if sent is not None and sent.key == relation.key and _shapeless(change, op):
                # The log keeps a delete's key, not its columns: the shape already sent,
                # which holds the key, says it without another Relation.
                relation = sent
            elif op != DDL:
                if sent != relation:
                    out.append((at, _relation(relation)))
                # Kept by identity: the next changes of this read take the common case.
                sent_map[relation.oid] = relation
            out.append((at, self._change(relation, change, op, at)))
        out.append((end, b"C\x00" + _I8.pack(end) + _I8.pack(end) + _I8.pack(stamp)))
        return out

    def _insert_run(self, run: list[Shown], base: int, skip: int, out: list[Message]) -> None:
        """Inserts of one table shape, the bulk case, encoded a column at a time by C-level
        maps (no Python step per row but a list index); the same bytes as `_change`."""
        relation = run[0][0]
        first = base + min(skip + 1, positions.LAST_PLACE)
        sent = self._sent.get(relation.oid)
        if sent is not relation:
            if sent != relation:
                out.append((first, _relation(relation)))
            self._sent[relation.oid] = relation
        rows = list(map(_ROW, map(_CHANGE, run)))
        prefix = b"I" + _I32.pack(relation.oid) + b"N"
        payloads = map(prefix.__add__, _tuples(relation, rows, self.binary))
        places = map(min, range(skip + 1, skip + 1 + len(run)), repeat(positions.LAST_PLACE))
        out.extend(zip(map(base.__add__, places), payloads, strict=True))

    def _change(self, relation: Relation, change: Change, op: str, at: int) -> bytes:
        """The message of one change of `op` (its `kind`), its row on `relation`."""
        relid = _I32.pack(relation.oid)
        if op == INSERT:
            return b"I" + relid + b"N" + self._tuple(relation, change.row)
        if op == UPDATE:
            old = old_row(change)
            before = b"" if old is None else b"O" + self._tuple(relation, old)
            return b"U" + relid + before + b"N" + self._tuple(relation, change.row)
        if op == DELETE:
            old = old_row(change)
            if old is not None:
                return b"D" + relid + b"O" + self._tuple(relation, old)
            values = key_values(relation, change)
            key = relation.key_row(values) if values is not None else None
            return b"D" + relid + b"K" + self._tuple(relation, key)
        if op == TRUNCATE:
            return b"T" + _I32.pack(1) + b"\x00" + relid
        content = statement(change).encode("utf-8")
        return (
            b"M\x01"
            + _I8.pack(at)
            + DDL_PREFIX.encode()
            + b"\x00"
            + _I32.pack(len(content))
            + content
        )

    def _tuple(self, relation: Relation, row: Sequence[Any] | None) -> bytes:
        made = self._encoders.get(relation.oid)
        if made is None or (made[0] is not relation and made[0] != relation):
            made = self._encoders[relation.oid] = (relation, _row_encoder(relation, self.binary))
        elif made[0] is not relation:
            made = self._encoders[relation.oid] = (relation, made[1])
        return made[1](row if row is not None else (None,) * len(relation.columns))


def _row_encoder(relation: Relation, binary: bool) -> Callable[[Sequence[Any]], bytes]:
    """TupleData of a row on `relation`: `n` for NULL, else `t` (or `b`), length, bytes."""
    pg_types = [types.pg_type(t) for t in relation.types]
    encoders = [pg.binary if binary else pg.text for pg in pg_types]
    head = _I16.pack(len(encoders))
    marker = b"b" if binary else b"t"
    pack = _I32.pack

    def encode(row: Sequence[Any]) -> bytes:
        parts = [head]
        for make, value in zip(encoders, row, strict=True):
            if value is None:
                parts.append(b"n")
            else:
                data = make(value)
                parts.append(marker + pack(len(data)) + data)
        return b"".join(parts)

    return encode


# Text encoders that are C functions (a map over them runs no Python per value).
_FAST_TEXT: dict[str, Callable[[Any], bytes]] = {
    "INT": b"%d".__mod__,
    "BIGINT": b"%d".__mod__,
    "STRING": str.encode,
    "SYMBOL": str.encode,
}


_RELATION, _CHANGE = itemgetter(0), itemgetter(1)
_OP, _ROW, _OLD = attrgetter("op"), attrgetter("row"), attrgetter("old")
_NOT_BEFORE = {type(None), type(UNLOGGED)}  # an upsert's `old` when it is an insert


_TEXT_TYPES = {str, type(None)}


def _one_insert_run(shown: list[Shown]) -> bool:
    """Whether `shown` (more than one) are all inserts of one table shape (upserts with no
    row before them), told by C-level maps."""
    if len(shown) < 2:
        return False
    if len(set(map(id, map(_RELATION, shown)))) != 1:
        return False
    changes = list(map(_CHANGE, shown))
    return set(map(_OP, changes)) == {"upsert"} and set(map(type, map(_OLD, changes))) <= (
        _NOT_BEFORE
    )


def _tuples(relation: Relation, rows: list[tuple[Any, ...]], binary: bool) -> list[bytes]:
    """The TupleData of each row, built a column at a time."""
    pg_types = [types.pg_type(t) for t in relation.types]
    marker = b"b" if binary else b"t"
    fields: list[Sequence[bytes]] = []
    columns = zip(*rows, strict=True)
    for column, column_type, pg in zip(columns, relation.types, pg_types, strict=True):
        encode = pg.binary if binary else _FAST_TEXT.get(column_type, pg.text)
        if encode is str.encode and not set(map(type, column)) <= _TEXT_TYPES:
            # A column of a table dropped since is shown as text, whatever its values were
            # (relation_of); str.encode takes only str, the text encoder any value.
            encode = pg.text
        if None in column:
            fields.append([_field(marker, encode, value) for value in column])
            continue
        data = list(map(encode, column))
        lengths = map(_I32.pack, map(len, data))
        fields.append(list(map(bytes.__add__, map(marker.__add__, lengths), data)))
    head = _I16.pack(len(pg_types))
    return list(map(b"".join, zip(repeat(head, len(rows)), *fields, strict=True)))


def _field(marker: bytes, encode: Callable[[Any], bytes], value: Any) -> bytes:
    if value is None:
        return b"n"
    data = encode(value)
    return marker + _I32.pack(len(data)) + data


def _shapeless(change: Change, op: str) -> bool:
    """A change the log keeps no columns for: a truncate, a delete without its old row."""
    return op == TRUNCATE or (op == DELETE and old_row(change) is None)


def _relation(relation: Relation) -> bytes:
    keys = {k.lower() for k in relation.key}
    parts = [
        b"R",
        _I32.pack(relation.oid),
        b"public\x00",
        relation.name.encode("utf-8") + b"\x00",
        b"f" if relation.full else b"d",
        _I16.pack(len(relation.columns)),
    ]
    for name, column_type in zip(relation.columns, relation.types, strict=True):
        flag = b"\x01" if relation.full or name.lower() in keys else b"\x00"
        oid = types.pg_type(column_type).oid
        parts += [flag, name.encode("utf-8") + b"\x00", _I32.pack(oid), _I32.pack(-1)]
    return b"".join(parts)


def _name_list(text: str) -> list[str]:
    """`publication_names`' value: names separated by commas, each bare (folded to lower
    case) or "quoted", as PostgreSQL's SplitIdentifierString reads them."""
    names: list[str] = []
    for part in re.findall(r'\s*("(?:[^"]|"")*"|[^,]+)\s*(?:,|$)', text):
        part = part.strip()
        if part.startswith('"') and part.endswith('"') and len(part) >= 2:
            names.append(part[1:-1].replace('""', '"'))
        elif part:
            names.append(part.lower())
    if not names:
        raise BadRequest("invalid publication_names syntax")
    return names


def make_plugin(name: str, options: Sequence[tuple[str, str | None]]) -> OutputPlugin:
    """The plugin `name` with a START_REPLICATION's options; BadRequest (22023) for an
    option it refuses."""
    given = dict(options)
    if name == "test_decoding":
        return TestDecoding(given)
    return PgOutput(given)
