"""A row's current state by the key an event stream's events carry (`GET /stream/row`).

What a caller may rely on: `read_row` checks the caller's right to read the table before
the table's or the row's existence, answers the row as it is now, and a NotFound once no
row has that key; a key that is not the hex of a MessagePack `[partition, identity]` is a
BadRequest.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from refimpl.engine.access import Principal, Right
from refimpl.engine.instance import Instance
from refimpl.engine.result import Column
from refimpl.errors import BadRequest, NotFound


@dataclass(frozen=True, slots=True)
class RowAnswer:
    """A row's current state by its key (`GET /stream/row`)."""

    database: str
    table: str
    key: str
    columns: list[Column]
    row: tuple


def read_row(
    instance: Instance, principal: Principal, database: str, table: str, key: str
) -> RowAnswer:
    """The row with `key` (hex, as events carry it) as it is now; 404 once it is gone."""
    instance.access.check(principal, database, Right.READ, table)
    found = instance.database(database)
    part, ident = _decode_key(key)
    with found.state_lock:
        stored = found.tables.get(table.lower())
        if stored is None:
            raise NotFound(f"table '{table}' does not exist in database '{found.name}'")
        schema = stored.schema
        row = stored.get(ident) if stored.part_of_ident(ident) == part else None
    if row is None:
        raise NotFound(f"no row with key {key} in table '{schema.name}': it is gone")
    columns = [Column(c.name, c.type) for c in schema.columns]
    return RowAnswer(found.name, schema.name, key, columns, row)


def _decode_key(key: str) -> tuple[tuple, tuple]:
    try:
        part, ident = msgspec.msgpack.decode(bytes.fromhex(key))
        return tuple(part), tuple(ident)
    except (ValueError, TypeError, msgspec.DecodeError):
        shown = key if len(key) <= 40 else key[:40] + "..."
        raise BadRequest(
            f"the parameter 'key' must be a row's key as the stream's events give it (hex),"
            f" not '{shown}'"
        ) from None
