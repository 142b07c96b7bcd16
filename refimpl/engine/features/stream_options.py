"""The changefeed options on the event stream (spec: changefeeds, the event stream's options).

A stream opened with options (`initial`, `states`, `types`, `squash`, `where`) reads through
an `OptionCursor`: inside an initial copy it reads the table's rows and the changes between
its pages itself (`initial_copy.read_initial`); past the copy it takes what a plain
`EventCursor` takes (whose ids, resumes, replay window and resets stay as they are) and
applies the options to each event's `Change` record, by the one function every outlet
calls (`feed_options.apply_options`; each change's type by `type_of`); a change
they leave as it was keeps its shared encoding, one they changed is encoded again by its
table's `EventShape`. It never changes a `Taken` that other streams share. What a caller
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
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from refimpl.engine.features.change_stream import Change
from refimpl.engine.features.event_cursor import (
    CHANGE,
    INITIAL,
    NO_LINKS,
    RESET,
    Event,
    EventCursor,
    EventShape,
    Links,
    Position,
    StreamItem,
    Taken,
)
from refimpl.engine.features.feed_options import (
    FeedFilter,
    FeedOptions,
    apply_options,
    change_ident,
    type_of,
)
from refimpl.engine.features.initial_copy import CopyPosition, read_initial
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import BadRequest, Gone, InvalidValue, NotFound, UnknownTable

if TYPE_CHECKING:
    from refimpl.engine.storage.database import Database

STATE = "state"
_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder().decode
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
        shape = EventShape(self._database.name, schema, feed.links)
        size = 0
        for item in batch.items:
            data = shape.data(item.change)
            if data is None:  # TRUNCATE, a dropped partition: the rows changed as a whole
                return self._restart(events)
            position = item.position
            event_id = (
                ""
                if position is None
                else (position.event_id() if isinstance(position, CopyPosition) else str(position))
            )
            encoded = self._encoded(data, item.change)
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
        segment: list[_Shaped] = []
        for event in taken.events:
            if event.kind == CHANGE:
                assert event.item is not None  # every change event carries its item
                segment.append(_Shaped(event, event.item, event.item.change))
                continue
            events += self._finish(segment)
            segment = []
            if event.kind == RESET and self._options.initial:
                return self._restart(events)  # the ready that follows it is the copy's
            events.append(event)
        events += self._finish(segment)
        return taken.more

    def _finish(self, segment: list[_Shaped]) -> list[Event]:
        """A part's changes (between resets and states) as the options show them: the rules
        every outlet applies (`feed_options.apply_options`)."""
        feed = self._feed
        shaped = apply_options(
            segment, _change_of, _with_change, _ident, self._options, feed.feed_filter, _schema_of
        )
        return [self._shown(each) for each in shaped]

    def _shown(self, shaped: _Shaped) -> Event:
        """The event of a change the options kept: its shared data when they changed nothing
        of it, else its data made again by its table's `EventShape`."""
        event, item, change = shaped
        if change is None:  # a schema change of a table that is gone: shown as it came
            return event
        if change is item.change:
            if not self._options.types:
                return event
            data = _decode(item.data)
        else:
            assert item.shape is not None  # a change the options changed has its table's
            key = item.key if change.op == "upsert" else None
            data = item.shape.data(change, key)
            assert data is not None  # only a ddl's is None, and no option changes a ddl
        return Event(event.id, CHANGE, self._encoded(data, change), item)

    # -- events ---------------------------------------------------------------------------

    def _encoded(self, data: dict[str, Any], change: Change) -> bytes:
        if self._options.types:
            data = {**data, "type": event_type(change)}
        return _json.encode(data)

    def _state(self, name: str) -> Event:
        data = {"state": name, "type": STATE} if self._options.types else {"state": name}
        return Event("", STATE, _json.encode(data))


class _Shaped(NamedTuple):
    """A change event on its way through the options: the event as the plain stream took
    it, its item, and its change as the options show it (None: a schema change of a table
    that is gone, shown as it came)."""

    event: Event
    item: StreamItem
    change: Change | None


def event_type(change: Change) -> str:
    """A change's `type` on the event stream: `schema` for a schema change, `initial` for a
    row of a copy, else its type on every outlet (`feed_options.type_of`)."""
    if change.op == "ddl":
        return "schema"
    if change.op == INITIAL:
        return "initial"
    return type_of(change)


def _ident(shaped: _Shaped) -> Hashable:
    """The row a change is about (`change_ident`) in its table; a change of a table without
    a key, or a schema change, is its own."""
    event, item, change = shaped
    shape = item.shape
    if change is None or shape is None or change.op == "ddl" or not shape.key_positions:
        return event.id
    return (item.table, change_ident(change, shape.key_positions))


def _change_of(shaped: _Shaped) -> Change | None:
    """Its change, None for one that passes every option as it came (a schema change of a
    table that is gone)."""
    return None if shaped.item.shape is None else shaped.change


def _with_change(shaped: _Shaped, change: Change) -> _Shaped:
    return shaped._replace(change=change)


def _schema_of(shaped: _Shaped) -> TableSchema:
    assert shaped.item.shape is not None  # `_change_of` gave its change: it has its table
    return shaped.item.shape.schema
