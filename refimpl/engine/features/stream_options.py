"""The changefeed options on the event stream (spec: changefeeds, the event stream's options).

A stream opened with options (`initial`, `states`, `types`, `squash`, `where`) reads through
an `OptionCursor`: inside an initial copy it reads the table's rows and the changes between
its pages itself (`initial_copy.read_initial`); past the copy it takes what a plain
`EventCursor` takes (whose ids, resumes, replay window and resets stay as they are) and
reshapes those events: it never changes a `Taken` that other streams share. What a caller
may rely on:

- ids are the plain stream's (`<lsn>`, `<lsn>.<n>`) past the copy and `<lsn>:<hex>` inside
  it (the copy's own positions); a change inside a transaction during the copy has no id
  (`Event.id == ""`), so a resume never splits what it cannot name;
- a filtered feed (`where`) and a copy follow exactly one table; a change that leaves the
  filter is a `delete` of its key on a table with before-images, as on `/api/changes`;
- `squash` merges the changes of one row within one part (what one take reads, at most the
  stream's budget of events), never across a `reset` or `ready`; each change that stays
  keeps its own id, so resuming from any of them loses nothing;
- a `reset` of a stream with `initial=true` is followed by the copy again (its id `0`: a
  reconnect with it starts the copy), not by `ready`: the reader's rows were wrong;
- a part is about `budget` bytes of events at most, the copy's pages too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change
from refimpl.engine.features.event_stream import (
    CHANGE,
    NO_LINKS,
    RESET,
    Event,
    EventCursor,
    Links,
    Position,
    Taken,
    ddl_item,
    row_key,
)
from refimpl.engine.features.feed_options import (
    FeedFilter,
    FeedOptions,
    Verdict,
    filter_verdict,
    squash_items,
)
from refimpl.engine.features.initial_copy import INITIAL, CopyPosition, read_initial
from refimpl.engine.storage import values
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import BadRequest, Gone, InvalidValue, NotFound, UnknownTable

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

STATE = "state"
_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder().decode
TYPES = {
    "create": "add",
    "update": "change",
    "upsert": "change",
    "delete": "remove",
    "schema": "schema",
    INITIAL: "initial",
}
FIRST_PAGE_ROWS = 100
MAX_PAGE_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class StreamFeed:
    """A stream's options, checked against its database when it opens."""

    options: FeedOptions
    table: str | None  # the one table of `where` and `initial` (as named), else None
    feed_filter: FeedFilter | None
    filter_columns: tuple[tuple[str, str], ...]  # (name, type) the filter reads, in order
    copy_from: CopyPosition | None  # a resume inside the copy
    links: Links = NO_LINKS  # how the protocol layer names the rows' links and the stream

    @classmethod
    def check(
        cls,
        database: Database,
        tables: Sequence[str],
        options: FeedOptions,
        copy_from: CopyPosition | None,
        links: Links = NO_LINKS,
    ) -> StreamFeed:
        """The options of a stream of `tables` (rights and existence already checked):
        BadRequest when `initial` or `where` has not exactly one table, the filter's own
        errors (SqlError with its place), InvalidValue for a copy of a table without a key."""
        needs_one = [
            name
            for name, on in (("initial", options.initial), ("where", options.where is not None))
            if on
        ]
        if needs_one and len(tables) != 1:
            raise BadRequest(
                f"the parameter '{needs_one[0]}' needs exactly one table= on {links.stream},"
                f" not {len(tables)}: name the table it reads, as in table=t"
            )
        table = tables[0] if needs_one else None
        feed_filter = None
        columns: tuple[tuple[str, str], ...] = ()
        if table is not None:
            schema = _schema(database, table)
            if options.where is not None:
                feed_filter = FeedFilter.compile(schema, options.where)
                columns = tuple((c.name, c.type) for c in schema.columns)
            if options.initial and not schema.layout().key_positions:
                raise InvalidValue(
                    f"initial=true needs a table with a PRIMARY KEY or DEDUP KEY; "
                    f"'{schema.name}' has neither, so its rows have no identity shared by the"
                    " copy and the stream"
                )
        return cls(options, table, feed_filter, columns, copy_from, links)

    def cursor(
        self,
        database: Database,
        resume: Position | None,
        plain: Callable[[Position | None], EventCursor],
    ) -> OptionCursor:
        """The stream's cursor; `plain(resume)` makes the plain cursor it reads past the copy."""
        return OptionCursor(self, database, resume, plain)


def _schema(database: Database, table: str) -> TableSchema:
    stored = database.tables.get(table.lower())  # one dict read: atomic
    if stored is None:
        raise NotFound(f"table '{table}' does not exist in database '{database.name}'")
    return stored.schema


class OptionCursor:
    """One stream's place when it has options: `take` as `EventCursor.take`."""

    def __init__(
        self,
        feed: StreamFeed,
        database: Database,
        resume: Position | None,
        plain: Callable[[Position | None], EventCursor],
    ) -> None:
        self._feed = feed
        self._options = feed.options
        self._database = database
        self._plain = plain
        options = feed.options
        starts_copy = (
            options.initial and feed.copy_from is None and (resume is None or resume == Position(0))
        )
        self._copying = options.initial and (feed.copy_from is not None or starts_copy)
        self._at: CopyPosition | None = feed.copy_from
        self._resume = None if self._copying else resume
        self._inner: EventCursor | None = None
        # The first state: `initializing` before a new copy, `ready` first of a new stream.
        self._announce = options.states and (
            starts_copy or (resume is None and not options.initial)
        )
        self._page_rows = FIRST_PAGE_ROWS

    def take(self, budget: int) -> Taken:
        """The next events, about `budget` bytes at most (at least one while any is ready)."""
        events: list[Event] = []
        if self._announce:
            self._announce = False
            events.append(self._state("initializing" if self._copying else "ready"))
        while True:
            if self._copying:
                more = self._copy_step(events, budget)
            else:
                more = self._plain_step(events, budget)
            if events or not more:
                return Taken(events, more)

    # -- inside the copy -------------------------------------------------------------------

    def _copy_step(self, events: list[Event], budget: int) -> bool:
        feed = self._feed
        assert feed.table is not None
        try:
            schema = _schema(self._database, feed.table)
            batch = read_initial(
                self._database, schema, self._at, self._page_rows, feed.feed_filter
            )
        except Gone:
            return self._restart(events)
        except (UnknownTable, NotFound):
            # The table was dropped: its rows are gone; the stream goes on past them.
            lsn = self._database.log.durable_lsn
            events.append(Event(str(lsn), RESET, b"{}"))
            return self._copy_done(events, lsn)
        shown = _Shown(self._database.name, schema, feed.links)
        size = 0
        for item in batch.items:
            data = shown.data(item.change)
            if data is None:  # TRUNCATE, a dropped partition: the rows changed as a whole
                return self._restart(events)
            position = item.position
            event_id = (
                ""
                if position is None
                else (position.event_id() if isinstance(position, CopyPosition) else str(position))
            )
            encoded = self._encoded(data)
            size += len(encoded)
            events.append(Event(event_id, CHANGE, encoded))
        rows = sum(1 for item in batch.items if item.change.op == INITIAL)
        if rows:
            self._page_rows = max(1, min(MAX_PAGE_ROWS, self._page_rows * budget // max(size, 1)))
        if not batch.copying:
            assert isinstance(batch.position, int)
            return self._copy_done(events, batch.position)
        assert isinstance(batch.position, CopyPosition)
        self._at = batch.position
        return True

    def _copy_done(self, events: list[Event], lsn: int) -> bool:
        """The copy is over at `lsn`: `ready` (as a state), then the stream from there."""
        self._copying = False
        self._at = None
        self._inner = None
        self._resume = Position(lsn)
        if self._options.states:
            events.append(self._state("ready"))
        return True

    def _restart(self, events: list[Event]) -> bool:
        """The rows the reader holds are wrong: `reset` (id 0, the copy's start), the copy."""
        events.append(Event("0", RESET, b"{}"))
        self._copying = True
        self._at = None
        self._inner = None
        if self._options.states:
            events.append(self._state("initializing"))
        return True

    # -- past the copy: the plain stream, reshaped ------------------------------------------

    def _plain_step(self, events: list[Event], budget: int) -> bool:
        if self._inner is None:
            self._inner = self._plain(self._resume)
        taken = self._inner.take(budget)
        segment: list[tuple[str, dict[str, Any]]] = []
        for event in taken.events:
            if event.kind == CHANGE:
                data = self._filtered(_decode(event.data))
                if data is not None:
                    segment.append((event.id, data))
                continue
            events += self._finish(segment)
            segment = []
            if event.kind == RESET and self._options.initial:
                return self._restart(events)  # the ready that follows it is the copy's
            events.append(event)
        events += self._finish(segment)
        return taken.more

    def _filtered(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The change as the filtered feed shows it, or None (`filter_verdict`)."""
        if self._feed.feed_filter is None or data["op"] == "schema":
            return data
        verdict = filter_verdict(data["op"], data["row"], data.get("old_row"), self._matches)
        if verdict is Verdict.KEEP:
            return data
        if verdict is Verdict.ENTERS:
            return {**data, "op": "create", "old_row": None}
        if verdict is Verdict.LEAVES:
            return {**data, "op": "delete", "row": None, "href": None}
        return None

    def _matches(self, shown: dict[str, Any]) -> bool:
        row = []
        for name, type_ in self._feed.filter_columns:
            value = shown.get(name)
            if type_ == "TIMESTAMP" and isinstance(value, str):
                value = values.parse_timestamp(value)
            row.append(value)
        assert self._feed.feed_filter is not None
        return self._feed.feed_filter.matches(row)

    def _finish(self, segment: list[tuple[str, dict[str, Any]]]) -> list[Event]:
        if self._options.squash:
            segment = self._squashed(segment)
        return [Event(event_id, CHANGE, self._encoded(data)) for event_id, data in segment]

    def _squashed(
        self, segment: list[tuple[str, dict[str, Any]]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """One change per row, the latest with the first old row; a row created and deleted
        within the segment disappears (`squash_items`). Rows of a table without a key are
        left as they are."""
        keyed: dict[str, bool] = {}

        def ident(item: tuple[str, dict[str, Any]]) -> Hashable:
            event_id, data = item
            table = data["table"]
            if table not in keyed:
                stored = self._database.tables.get(table.lower())
                keyed[table] = stored is not None and bool(stored.schema.layout().key_positions)
            if data["key"] is None or not keyed[table]:
                return event_id
            return (table, data["key"])

        return squash_items(segment, ident, _merged)

    # -- events ---------------------------------------------------------------------------

    def _encoded(self, data: dict[str, Any]) -> bytes:
        if self._options.types:
            data = {**data, "type": TYPES.get(data["op"], "change")}
        return _json.encode(data)

    def _state(self, name: str) -> Event:
        data = {"state": name, "type": STATE} if self._options.types else {"state": name}
        return Event("", STATE, _json.encode(data))


def _merged(
    first: tuple[str, dict[str, Any]], last: tuple[str, dict[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """A row's last change, with its first change's old row (see `_squashed`)."""
    start, (event_id, data) = first[1], last
    if "old_row" not in data or start is data:
        return last
    if start["op"] == "create" and data["op"] == "delete":
        return None
    op = "create" if start["op"] == "create" and data["op"] != "delete" else data["op"]
    return event_id, {**data, "op": op, "old_row": start.get("old_row")}


class _Shown:
    """The event-stream data of a change of one table read by the copy (`Change` tuples)."""

    def __init__(self, database: str, schema: TableSchema, links: Links) -> None:
        self._schema = schema
        self._width = len(schema.columns)
        self._full = schema.replica_identity_full
        self._key_positions = schema.layout().key_positions
        self._base = links.row_base(database, schema.name)

    def data(self, change: Change) -> dict[str, Any] | None:
        """The change's data; None for a change of the rows as a whole (a reset)."""
        schema = self._schema
        op, lsn, old = change.op, change.lsn, change.old
        if op == "ddl":
            assert change.key is not None  # a ddl's key is its statement's text
            item = ddl_item(schema.name.lower(), schema.name, change.key, lsn)
            return None if item.kind == RESET else _decode(item.data)
        data: dict[str, Any]
        if op == "delete":
            data = {
                "table": schema.name,
                "op": "delete",
                "key": change.key,
                "lsn": lsn,
                "row": None,
                "href": None,
            }
        else:
            row = change.row
            key = (
                change.key
                if op == INITIAL and change.key is not None
                else row_key(schema, row, tuple(row[p] for p in self._key_positions))
            )
            if op == INITIAL or old is UNLOGGED:
                shown_op = op if op == INITIAL else "upsert"
            else:
                shown_op = "create" if old is None else "update"
            if op == INITIAL and row.count(None) == self._width:  # a point feed's missing row
                data = {
                    "table": schema.name,
                    "op": op,
                    "key": key,
                    "lsn": lsn,
                    "row": None,
                    "href": None,
                }
            else:
                data = {
                    "table": schema.name,
                    "op": shown_op,
                    "key": key,
                    "lsn": lsn,
                    "row": self._shown(row),
                    "href": None if self._base is None else self._base + key,
                }
        if self._full:
            data["old_row"] = self._shown(old) if isinstance(old, tuple) else None
        return data

    def _shown(self, row: Sequence[Any]) -> dict[str, Any]:
        return {
            c.name: values.to_json(v, c.type)
            for c, v in zip(self._schema.columns, row, strict=True)
        }
