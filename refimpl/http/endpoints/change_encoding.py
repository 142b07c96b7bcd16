"""The JSON objects and SSE bytes of change-stream answers (`GET /api/changes`).

`ChangeObjects` makes one change's object in C (msgspec structs, no dict per row); a table
without before-images and a feed without options get exactly `ChangeEvent`, the others
`OptionChangeEvent`, whose UNSET fields are not written (spec: changes, changefeeds).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from refimpl.engine.features.change_stream import KEY, OP, ROW, UNLOGGED, Change, ChangeBatch
from refimpl.engine.features.feed_options import ShapedBatch
from refimpl.engine.features.initial_copy import INITIAL
from refimpl.engine.storage import values
from refimpl.http.encode import encode_json

RETRY_MS = 1000
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
JSON_HEADERS = {"Cache-Control": "no-store"}


class ChangeEvent(msgspec.Struct):
    """One change as the JSON object of the stream, in the order of its fields."""

    lsn: int
    seq: int
    committed_at: str
    op: str
    key: str | None
    row: object


class OptionChangeEvent(msgspec.Struct):
    """A change of a table with before-images (`old_row` beside `row`) or of a feed with
    options (`type`); a field left UNSET is not written (spec: changefeeds)."""

    lsn: int
    seq: int
    committed_at: str | None
    op: str
    key: str | None
    row: object
    old_row: object = msgspec.UNSET
    type: str | msgspec.UnsetType = msgspec.UNSET


def state(name: str, typed: bool) -> dict[str, str]:
    """A state entry (`initializing`, `ready`), with its type when types are asked for."""
    return {"state": name, "type": "state"} if typed else {"state": name}


@functools.lru_cache(maxsize=256)
def _row_type(names: tuple[str, ...]) -> type[msgspec.Struct]:
    """A struct that encodes as `{name: value, ...}` for these column names: made from a
    row's values in C, with no dict per row. Fields are named f0, f1, ... and renamed to the
    columns, so that any column name works."""
    fields = [f"f{index}" for index in range(len(names))]
    return msgspec.defstruct("Row", fields, rename=dict(zip(fields, names, strict=True)))


class ChangeObjects:
    """Makes the JSON object of each change of one table's stream (`row` only for an upsert).

    Built once per answer: it knows which columns need converting (timestamps to text,
    non-finite doubles to null, as `values.to_json` does) and leaves the others as they are,
    and it formats a transaction's `committed_at` once for all its rows.
    """

    def __init__(self, names: tuple[str, ...], types: dict[str, str]) -> None:
        self._width = len(names)
        self._row = _row_type(names)
        self._timestamps = [i for i, name in enumerate(names) if types[name] == "TIMESTAMP"]
        self._doubles = [i for i, name in enumerate(names) if types[name] == "DOUBLE"]
        self._converts = bool(self._timestamps or self._doubles)
        self._lsn = -1
        self._committed_at = ""

    def __call__(self, change: Change) -> ChangeEvent:
        lsn = change[0]
        if lsn != self._lsn:
            self._lsn, self._committed_at = lsn, values.format_timestamp(change[2])
        row = None
        if change[OP] == "upsert":
            cells = change[ROW:]
            row = self._made(cells) if self._converts else self._row(*cells)
        return ChangeEvent(lsn, change[1], self._committed_at, change[OP], change[KEY], row)

    def with_options(self, change: Change, full: bool, kind: str | None) -> OptionChangeEvent:
        """The object of a change with `old_row` (`full`: the change's last item is the old
        row) and `type` (`kind`) when given."""
        lsn = change[0]
        if change[2] is None:  # a row of an initial copy: no commit of its own
            self._lsn, self._committed_at = -1, None
        elif lsn != self._lsn:
            self._lsn, self._committed_at = lsn, values.format_timestamp(change[2])
        row = None
        cells = change[ROW:ROW + self._width]
        # A point feed's missing row is an initial change whose cells are all NULL.
        if change[OP] == "upsert" or (change[OP] == INITIAL
                                      and cells.count(None) != self._width):
            row = self._made(cells)
        event = OptionChangeEvent(lsn, change[1], self._committed_at, change[OP], change[KEY],
                                  row)
        if full:
            old = change[-1]
            event.old_row = None if old is None or old is UNLOGGED else self._made(old)
        if kind is not None:
            event.type = kind
        return event

    def _made(self, cells: Sequence[Any]) -> msgspec.Struct:
        if self._converts:
            cells = list(cells)
            for at in self._timestamps:
                if (value := cells[at]) is not None:
                    cells[at] = values.format_timestamp(value)
            for at in self._doubles:
                if (value := cells[at]) is not None and not math.isfinite(value):
                    cells[at] = None
        return self._row(*cells)


@dataclass(frozen=True, slots=True)
class Shaping:
    """What an answer shows beyond the plain stream: `old_row` (a table with before-images),
    each change's `type`, and a `ready` state first."""

    full: bool = False
    types: list[str] | None = None
    ready: bool = False

    def objects(self, names: tuple[str, ...], types: dict[str, str]) -> Callable[..., Any]:
        """The maker of the answer's objects, called with a change and its index."""
        objects = ChangeObjects(names, types)
        if not self.full and self.types is None:
            return lambda change, _index: objects(change)
        kinds = self.types
        return lambda change, index: objects.with_options(
            change, self.full, None if kinds is None else kinds[index])

    def state(self) -> dict[str, str]:
        return state("ready", self.types is not None)


PLAIN = Shaping()


_CHANGE = b"event: change\ndata: "
_lines = msgspec.json.Encoder().encode_lines


def _json_lines(objects: list[Any]) -> list[bytes]:
    """The JSON text of each object, made in one call (JSON text holds no raw newline)."""
    try:
        return _lines(objects).split(b"\n")[:-1]
    except (OverflowError, TypeError):  # what only encode_json's fallback encodes
        return [encode_json(item) for item in objects]


def encode_sse(batch: ChangeBatch | ShapedBatch, names: tuple[str, ...], types: dict[str, str],
               shaping: Shaping = PLAIN) -> bytes:  # fmt: skip
    """Events: `state` first when asked, `change` per row (`id` on a transaction's last
    row), then `position`."""
    parts = [f"retry: {RETRY_MS}\n\n".encode()]
    if shaping.ready:
        parts.append(b"event: state\ndata: " + encode_json(shaping.state()) + b"\n\n")
    changes = batch.changes
    objects = shaping.objects(names, types)
    data = _json_lines([objects(change, index) for index, change in enumerate(changes)])
    for index, change in enumerate(changes):
        last_of_transaction = index + 1 == len(changes) or changes[index + 1][0] != change[0]
        head = b"id: %d\n%s" % (change[0], _CHANGE) if last_of_transaction else _CHANGE
        parts += (head, data[index], b"\n\n")
    position = encode_json({"next": batch.next_lsn, "more": batch.more}).decode("utf-8")
    parts.append(f"id: {batch.next_lsn}\nevent: position\ndata: {position}\n\n".encode())
    return b"".join(parts)


def encode_json_answer(
    table: str,
    batch: ChangeBatch,
    names: tuple[str, ...],
    types: dict[str, str],
    durable: int,
    oldest: int,
    shaping: Shaping = PLAIN,
) -> bytes:
    objects = shaping.objects(names, types)
    changes: list[Any] = [shaping.state()] if shaping.ready else []
    changes += [objects(c, index) for index, c in enumerate(batch.changes)]
    return encode_json(
        {
            "table": table,
            "changes": changes,
            "next": batch.next_lsn,
            "more": batch.more,
            "durable_lsn": durable,
            "oldest_lsn": oldest,
        }
    )
