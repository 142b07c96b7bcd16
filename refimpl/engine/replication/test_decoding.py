"""contrib/test_decoding's text output of a committed transaction, and the helpers both
output plugins share (spec: replication). Here, not in the protocol layer, because SQL reads
it too (`pg_logical_slot_get_changes`).

Each message is (position, bytes): Begin at place 0, the n-th change shown at place n,
Commit at the transaction's end; `skip` leaves out the changes a client already confirmed.
Values are written as PostgreSQL's output functions write them: numbers bare, booleans
`true`/`false`, text and timestamps quoted (`'it''s'`, `'2026-09-24 10:00:00.5+00'`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from refimpl.engine import replication_positions as positions
from refimpl.engine.replication.decoding import (
    DDL,
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
from refimpl.engine.statements.pg_catalog import TYPES
from refimpl.engine.storage.values import format_timestamp
from refimpl.errors import BadRequest

DDL_PREFIX = "kdb.ddl"  # the prefix of the logical decoding message that carries a DDL
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*")
_BARE = frozenset({"INT", "BIGINT", "DOUBLE"})
Message = tuple[int, bytes]  # (position, payload)


def xid_of(lsn: int) -> int:
    """The transaction id a plugin shows: the LSN's low 32 bits (KDB has no xids)."""
    return lsn & 0xFFFFFFFF


def flag(options: dict[str, str | None], name: str, default: bool) -> bool:
    """A plugin's boolean option as PostgreSQL reads one (`on`, `1`, `true`, ...)."""
    if name not in options:
        return default
    value = options[name]
    if value is None:
        return True
    lowered = value.strip().lower()
    if lowered in ("1", "t", "true", "on", "yes", "y"):
        return True
    if lowered in ("0", "f", "false", "off", "no", "n"):
        return False
    raise BadRequest(f'could not parse value "{value}" for parameter "{name}"')


def quote_name(name: str) -> str:
    """An identifier as PostgreSQL's quote_identifier writes it."""
    return name if _PLAIN_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def type_name(column_type: str) -> str:
    """format_type's name of a column type (`integer`, `text`, ...)."""
    return TYPES.get(column_type, TYPES["STRING"])[3]


def timestamp_text(micros: int) -> str:
    """`2026-09-24 10:00:00.5+00`: PostgreSQL's ISO output of a timestamptz in UTC."""
    head, _, fraction = format_timestamp(micros)[:-1].replace("T", " ", 1).partition(".")
    fraction = fraction.rstrip("0")
    return f"{head}.{fraction}+00" if fraction else f"{head}+00"


def literal(column_type: str, value: Any) -> str:
    """A value as test_decoding prints it."""
    if column_type == "BOOLEAN":
        return "true" if value else "false"
    if column_type == "DOUBLE":
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        text = repr(float(value))
        return text[:-2] if text.endswith(".0") else text
    if column_type in _BARE:
        return str(value)
    shown = timestamp_text(value) if column_type == "TIMESTAMP" else str(value)
    return "'" + shown.replace("'", "''") + "'"


class TestDecoding:
    """contrib/test_decoding's text: `BEGIN 529`, `table public.t: INSERT: id[integer]:1`,
    `COMMIT 529`; options `include-xids` (default on), `include-timestamp`,
    `skip-empty-xacts`, and `include-rewrites`, `only-local`, `force-binary` (accepted)."""

    __test__ = False  # not a pytest class despite its name

    def __init__(self, options: dict[str, str | None]) -> None:
        known = (
            "include-xids",
            "include-timestamp",
            "skip-empty-xacts",
            "only-local",
            "include-rewrites",
            "force-binary",
            "stream-changes",
        )
        for name, value in options.items():
            if name not in known:
                raise BadRequest(f'option "{name}" = "{value or "(null)"}" is unknown')
            flag(options, name, False)
        self.publications: list[str] | None = None
        self.xids = flag(options, "include-xids", True)
        self.timestamp = flag(options, "include-timestamp", False)
        self.skip_empty = flag(options, "skip-empty-xacts", False)

    def transaction(self, txn: Transaction, skip: int) -> list[Message]:
        if self.skip_empty and not txn.changes:
            return []
        lsn = txn.lsn
        xid = f" {xid_of(lsn)}" if self.xids else ""
        out: list[Message] = [(positions.position(lsn, 0), f"BEGIN{xid}".encode())]
        for place, change in enumerate(txn.changes[skip:], skip + 1):
            out.append((positions.position(lsn, place), self._change(change).encode("utf-8")))
        commit = f"COMMIT{xid}"
        if self.timestamp:
            commit += f" (at {timestamp_text(txn.committed_at)})"
        out.append((positions.end_of(lsn), commit.encode()))
        return out

    def _change(self, shown: Shown) -> str:
        relation, change = shown
        head = f"table public.{quote_name(relation.name)}:"
        op = kind(change)
        if op == TRUNCATE:
            return f"{head} TRUNCATE: (no-flags)"
        if op == DDL:
            text = statement(change)
            size = len(text.encode("utf-8"))
            return f"message: transactional: 1 prefix: {DDL_PREFIX}, sz: {size} content:{text}"
        if op == INSERT:
            return f"{head} INSERT:{self._tuple(relation, change.row, False)}"
        old = old_row(change)
        if op == UPDATE:
            before = ""
            if old is not None:
                before = f" old-key:{self._tuple(relation, old, True)} new-tuple:"
            return f"{head} UPDATE:{before}{self._tuple(relation, change.row, False)}"
        if old is not None:
            return f"{head} DELETE:{self._tuple(relation, old, True)}"
        key = key_values(relation, change)
        if key is None:
            return f"{head} DELETE: (no-tuple-data)"
        return f"{head} DELETE:{self._tuple(relation, relation.key_row(key), True)}"

    @staticmethod
    def _tuple(relation: Relation, row: Sequence[Any] | None, skip_nulls: bool) -> str:
        if row is None:
            return " (no-tuple-data)"
        parts = []
        for name, column_type, value in zip(relation.columns, relation.types, row, strict=True):
            if value is None and skip_nulls:
                continue
            shown = "null" if value is None else literal(column_type, value)
            parts.append(f" {quote_name(name)}[{type_name(column_type)}]:{shown}")
        return "".join(parts)
