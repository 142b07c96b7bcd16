"""The event stream's engine half: event ids, the events of a transaction, and a cursor.
(`refimpl.engine.event_streams` opens and serves the streams; this module is what they read.)

The event stream (`GET /stream/changes`, spec/stream.md) follows every table of a database,
or named ones, from the write-ahead log, as the change stream does: nothing past the durable
LSN, and its positions are the log's own, so a reader resuming from the id it last got
misses nothing and gets nothing twice, also across restarts and crashes.

- An **id** is `<lsn>` (after the whole transaction) or `<lsn>.<n>` (after its n-th event in
  this stream, from 1); `parse_event_id` reads both, `Position` is what they stand for.
- `stream_transactions.transaction_events` turns one log record into `StreamItem`s, each a
  `Change` record encoded once by its table's `EventShape` as the JSON of its `data` line
  and shared by every stream of the database
  (`recent_transactions.RecentTransactions` keeps the last ones, so that a thousand streams
  at the end of the log cost one log read and one encoding per commit). Streams current at
  one position with one view (the same tables, the same rights) also share what they take
  (`Transactions.shared`): one list of events, which the protocol layer encodes once
  (`Taken.encoded`).
- `EventCursor` is one stream's place: what it takes next, within a byte budget, with the
  replay window and `reset` decided as the spec says.

On a table with before-images (REPLICA IDENTITY FULL, spec: changefeeds) a change also has
`old_row`, and `op` tells `create` from `update`; initial copies come later (`Position` is
the seam they extend).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol, TypeVar

import msgspec

from refimpl.engine.features.change_stream import UNLOGGED, Change, delete_key
from refimpl.engine.storage import values
from refimpl.engine.storage.schema import RowLayout, TableSchema, period_of
from refimpl.errors import BadRequest, Gone, SqlError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

MAX_LSN = 2**63 - 1
_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder().decode
INITIAL = "initial"  # the op of a row of an initial copy (`initial_copy` makes them)

CHANGE, RESET, READY = "change", "reset", "ready"
T = TypeVar("T")  # what a shared piece of work makes (`Transactions.shared`)
# The named tuples made at every change of every commit streams follow (`StreamItem`,
# `StreamTransaction`, `Event`) are made by this C call with all their fields, not by their
# class's Python-level `__new__` (as `change_stream.ChangeRun.changes` makes `Change`s).
_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class Links:
    """How the protocol layer names the places the event stream's answers point to (its
    routes): the engine writes them as given and knows none itself.

    `row(database, table)` is the link of the table's rows, to which a row's hex key is
    appended (an event's `href`; None: events carry `"href": null`); `tickets` says where a
    new ticket is asked for, `stream` what the stream is called, in the errors' sentences."""

    row: Callable[[str, str], str] | None = None
    tickets: str = "a new ticket request"
    stream: str = "the event stream"

    def row_base(self, database: str, table: str) -> str | None:
        """The `href` of the table's rows but for the key (None: no links)."""
        return None if self.row is None else self.row(database, table)


NO_LINKS = Links()


@dataclass(frozen=True, slots=True)
class Position:
    """Where a stream stands: every transaction through `after_lsn` is done, and the first
    `skip` events of the next one."""

    after_lsn: int
    skip: int = 0

    def event_id(self) -> str:
        """The id a client resumes from to stand here again."""
        if self.skip:
            return f"{self.after_lsn + 1}.{self.skip}"
        return str(self.after_lsn)


def parse_event_id(text: str, what: str) -> Position:
    """`<lsn>` or `<lsn>.<n>` (n from 1) as the server gives them out; a clear 400 else."""
    lsn_text, dot, n_text = text.strip().partition(".")
    if not _digits(lsn_text) or (dot and not _digits(n_text)):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadRequest(
            f"{what} must be an event id as the stream gives them out, <lsn> or <lsn>.<n>"
            f" (as in 42 or 42.3), not '{shown}'"
        )
    lsn = int(lsn_text)
    if lsn > MAX_LSN:
        raise BadRequest(f"{what} names LSN {lsn}, beyond the largest LSN {MAX_LSN}")
    if not dot:
        return Position(lsn)
    n = int(n_text)
    if lsn < 1 or n < 1 or n > MAX_LSN:
        raise BadRequest(
            f"{what} '{text.strip()}' is out of range: in <lsn>.<n> both numbers start at 1"
        )
    return Position(lsn - 1, n)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19


# -- the events of one transaction ---------------------------------------------------------


class EventShape:
    """How the event stream shows the changes of one table: each one's `data` object (the
    one encoder of the stream's changes, live, past an option's pipeline and in a copy).

    A change's `op` there is `create` or `update` on a table with before-images (which
    also show `old_row`), `upsert` where the log keeps no row before it, `delete`, or
    `initial` for a row of an initial copy; an upsert's `key` is its row's hex key."""

    __slots__ = (
        "schema",
        "table",
        "_layout",
        "_width",
        "_full",
        "_key_positions",
        "_base",
        "_names",
        "_as_stored",
        "_partless",
    )

    def __init__(self, database: str, schema: TableSchema, links: Links = NO_LINKS) -> None:
        self.schema = schema
        self.table = schema.name.lower()  # the key of the stream's tables
        self._width = len(schema.columns)
        self._full = schema.replica_identity_full
        self._layout = schema.layout()
        self._key_positions = self._layout.key_positions
        self._partless = self._layout.period is None and self._layout.symbol_position is None
        self._base = links.row_base(database, schema.name)
        self._names = tuple(c.name for c in schema.columns)
        # `values.to_json` changes only a TIMESTAMP's value, and a float that is not finite
        # into None, which msgspec encodes as null too: a row without TIMESTAMP columns is
        # shown by its values as they are, the same JSON, at one C call (not a Python call
        # per column, at every change of every commit a stream follows).
        self._as_stored = all(c.type != "TIMESTAMP" for c in schema.columns)

    @property
    def key_positions(self) -> tuple[int, ...]:
        """The positions of the table's key columns (none: its rows have no identity)."""
        return tuple(self._key_positions)

    def key_of(self, row: Sequence[Any], rowid: int) -> str:
        """A row's hex key: of its key columns, or of its `rowid` in a table without a key."""
        positions = self._key_positions
        ident = tuple(map(row.__getitem__, positions)) if positions else (rowid,)
        if self._partless:
            return delete_key((), ident)  # as `row_key` makes it, with no partition part
        return row_key(self.schema, row, ident, self._layout)

    def data(self, change: Change, key: str | None = None) -> dict[str, Any] | None:
        """The change's `data` object (`key`: an upsert's hex key, made from its row when
        None); None for a change of the rows as a whole (a reset)."""
        op, lsn, old = change.op, change.lsn, change.old
        if op == "upsert" and old is UNLOGGED and key is not None and not self._full:
            # Most changes a stream shows (a row written to a table without before-images).
            return self.upsert_data(lsn, change.row, key)
        schema = self.schema
        if op == "ddl":
            assert change.key is not None  # a ddl's key is its statement's text
            item = ddl_item(self.table, schema.name, change.key, lsn)
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
            if key is None:
                key = change.key if op == INITIAL and change.key is not None else None
                key = key or self.key_of(row, 0)
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

    def upsert_data(self, lsn: int, row: Sequence[Any], key: str) -> dict[str, Any]:
        """The `data` object of an upsert of `row` (hex key `key`) at `lsn` on a table
        without before-images (`data` of such a change)."""
        return {
            "table": self.schema.name,
            "op": "upsert",
            "key": key,
            "lsn": lsn,
            "row": self._shown(row),
            "href": None if self._base is None else self._base + key,
        }

    def _shown(self, row: Sequence[Any]) -> dict[str, Any]:
        """The row's `row` object (its JSON encoding is what a stream shows)."""
        if self._as_stored:
            return dict(zip(self._names, row, strict=True))
        return {
            c.name: values.to_json(v, c.type) for c, v in zip(self.schema.columns, row, strict=True)
        }


class StreamItem(NamedTuple):
    """One event a transaction makes for a table: a `change` (its data encoded once) or a
    `reset` (the table's rows changed as a whole).

    A change's item also holds its `Change` record and its table's `EventShape` (None for
    a schema change of a table that is gone): a stream with options applies them to the
    record, and encodes again only what they changed. (A named tuple, as `Change` is: made
    once per change of every commit a stream follows, where a frozen dataclass's
    `__init__` costs a Python call per field.)"""

    table: str  # the table's key (lower case)
    kind: str  # CHANGE or RESET
    data: bytes  # the JSON of the `data` line
    change: Change | None = None
    shape: EventShape | None = None
    key: str | None = None  # the hex key `data` shows (an upsert's is made from its row)


class StreamTransaction(NamedTuple):
    """The events of one committed transaction (a named tuple: see `StreamItem`)."""

    lsn: int
    committed_at: int  # microseconds UTC
    items: tuple[StreamItem, ...]
    size: int  # bytes of the items' data, what keeping it costs
    resets: bool = False  # whether an item is a `reset` (a stream then looks at each)


def row_key(
    schema: TableSchema, row: Sequence[Any], ident: Sequence[Any], layout: RowLayout | None = None
) -> str:
    """The hex key of a row (spec: changes, the key of a delete): its partition and identity
    (`layout`: the schema's, when the caller holds it already)."""
    layout = layout or schema.layout()
    part: list[Any] = []
    if layout.period is not None:
        part.append(period_of(row[layout.time_position], layout.period))  # type: ignore[index]
    if layout.symbol_position is not None:
        symbol = row[layout.symbol_position]
        part += [symbol is None, symbol or ""]
    return delete_key(part, ident)


def ddl_item(key: str, table: str, text: str, lsn: int) -> StreamItem:
    """A schema change: `reset` when the table's rows changed as a whole (TRUNCATE, DROP
    TABLE, a dropped partition), else a `change` of op `schema` with the statement."""
    try:
        statement = parse_cached(text).statements[0]
    except (SqlError, IndexError):
        statement = None  # text of an older version: read it as a reset, the safe side
    if statement is None or isinstance(
        statement, ast.Truncate | ast.DropTable | ast.DropPartitionList | ast.DropPartitionWhere
    ):
        return StreamItem(key, RESET, b"{}")
    body = {
        "table": table,
        "op": "schema",
        "key": None,
        "lsn": lsn,
        "row": None,
        "href": None,
        "statement": text,
    }
    return StreamItem(key, CHANGE, _json.encode(body))


# -- what a cursor reads ------------------------------------------------------------------


class Transactions(Protocol):
    """The transactions of one database as cursors read them (`recent_transactions.
    RecentTransactions`: the last ones decoded and encoded once for every stream)."""

    @property
    def durable_lsn(self) -> int: ...

    def shared(self, key: Hashable, make: Callable[..., T], *args: object) -> T:
        """What `make(*args)` gives for `key`, made once for every asker while the durable
        LSN stands still."""
        ...

    def after(self, after_lsn: int) -> Iterator[StreamTransaction]:
        """The transactions after `after_lsn` up to the durable LSN, in order; Gone when the
        log no longer holds them."""
        ...


# -- one stream's place ----------------------------------------------------------------------


class Event(NamedTuple):
    """One event to send: its id, its name and the JSON of its data line (a change's also
    its `StreamItem`, which a stream with options reshapes). A named tuple: see
    `StreamItem`."""

    id: str
    kind: str
    data: bytes
    item: StreamItem | None = None


@dataclass(slots=True)
class Taken:
    events: list[Event]
    more: bool  # more is ready now: take again once these are sent
    # The protocol layer's encoding of `events` (opaque here), made by the first stream that
    # sends them: streams that took this same `Taken` (same position and view) share it.
    encoded: Any = None


class _Shown(dict[str, bool]):
    """Whether a stream shows a table (its `follows`), looked at once a take: a take is
    one look at the stream's rights, as a query's rights are checked once when it starts,
    not at each of the thousands of commits a take may run over (a user's right costs about
    200 Python opcodes to look up; the admin's 27). The next take looks again, and so does
    this one once the rights' version moves (`EventCursor.rights_version`)."""

    __slots__ = ("_follows",)

    def __init__(self, follows: Callable[[str], bool]) -> None:
        super().__init__()
        self._follows = follows

    def __missing__(self, table: str) -> bool:
        found = self[table] = self._follows(table)
        return found


@dataclass(slots=True)
class EventCursor:
    """One stream's place in its database's transactions, and what it takes next.

    `follows(table_key)` says, at each transaction, whether the stream shows the table (the
    tables it named, or every table, that its caller may read now). `resume` is the position
    a reconnect asked for (None: a new stream, current from now on). `clock` gives seconds
    since the epoch, as the log's commit times count. `rights_version` gives the version
    of the users, tokens and grants (None: rights never change under it), read at each
    transaction a take runs over: when it moved (a GRANT or REVOKE answered meanwhile), the
    take looks at `follows` again, so that no transaction that became durable after a
    REVOKE's answer is shown by the rights from before it.
    """

    recent: Transactions
    follows: Callable[[str], bool]
    replay_seconds: float
    clock: Callable[[], float]
    resume: Position | None = None
    # Streams whose views are equal follow the same tables: at the same position they take
    # the same `Taken`, made once (None: this cursor shares nothing).
    view: Callable[[], Hashable] | None = None
    rights_version: Callable[[], int] | None = None
    position: Position = field(default_factory=lambda: Position(0))
    ready_sent: bool = False
    _checking_window: bool = False
    _started: bool = False

    @property
    def current(self) -> bool:
        """Whether what it takes next depends on its position and view alone (it was sent
        `ready` and has nothing of a resume left to check): what a group of streams at one
        position may take for all of them (`event_streams.StreamGroup`)."""
        return (
            self._started
            and self.ready_sent
            and not self._checking_window
            and self.view is not None
        )

    def following(
        self, follows: Callable[[str], bool], view: Callable[[], Hashable]
    ) -> EventCursor:
        """A cursor at this one's place, shared by the streams whose view `view` gives: a
        group's own cursor."""
        return replace(self, follows=follows, view=view)

    def take(self, budget: int) -> Taken:
        """The next events, about `budget` bytes of data at most (at least one event)."""
        if self.current:
            # Current: what comes next depends on the position, view and budget alone.
            assert self.view is not None  # a current cursor has its view
            taken, self.position = self.recent.shared(
                (self.position, self.view(), budget), self._take_more, budget
            )
            return taken
        events: list[Event] = []
        if not self._started:
            self._started = True
            durable = self.recent.durable_lsn
            if self.resume is None:
                return Taken(self._current(events, durable), False)
            if self.resume.after_lsn + (1 if self.resume.skip else 0) > durable:
                return Taken(self._reset(events, durable), False)  # an id of another past
            self.position = self.resume
            self._checking_window = True
        return self._take_from(events, budget)

    def _take_more(self, budget: int) -> tuple[Taken, Position]:
        """What a current stream takes next, and where it then stands (shared: `view`)."""
        return self._take_from([], budget), self.position

    def _take_from(self, events: list[Event], budget: int) -> Taken:
        # Where it stands is kept in locals through the loop and set on the way out: a
        # current stream's take runs over every commit since the last round.
        size = 0
        shows = _Shown(self.follows)
        version = self.rights_version
        looked = 0 if version is None else version()  # before any look at `follows`
        at = self.position
        done, skip = at.after_lsn, at.skip  # every transaction through `done` is taken
        try:
            for txn in self.recent.after(done):
                # Read after the transaction: one durable after a REVOKE's answer finds the
                # version moved (it moves before the answer), and is looked at anew.
                if version is not None and version() != looked:
                    looked = version()
                    shows.clear()
                items = txn.items
                if len(items) == 1 and not skip and not txn.resets and not self._checking_window:
                    # Most transactions (a one-row INSERT's): what the loop below does with
                    # one change, without its list and range.
                    item = items[0]
                    done = txn.lsn
                    if shows[item.table]:
                        events.append(_new(Event, (f"{done}.1", CHANGE, item.data, item)))
                        size += len(item.data) + 40
                        if size >= budget:
                            self.position = Position(done)
                            return Taken(events, True)
                    continue
                shown = [item for item in items if shows[item.table]]
                if len(shown) <= skip:
                    done, skip = txn.lsn, 0
                    continue
                if self._checking_window:
                    self._checking_window = False
                    if txn.committed_at / 1e6 < self.clock() - self.replay_seconds:
                        return Taken(self._reset(events, self.recent.durable_lsn), False)
                if txn.resets and any(item.kind == RESET for item in shown):
                    self._reset(events, txn.lsn)
                    done, skip = txn.lsn, 0
                    continue
                for n in range(skip + 1, len(shown) + 1):
                    item = shown[n - 1]
                    events.append(_new(Event, (f"{txn.lsn}.{n}", CHANGE, item.data, item)))
                    size += len(item.data) + 40
                    if size >= budget and n < len(shown):
                        self.position = Position(txn.lsn - 1, n)
                        return Taken(events, True)
                done, skip = txn.lsn, 0
                if size >= budget:
                    self.position = Position(done)
                    return Taken(events, True)
        except Gone:
            return Taken(self._reset(events, self.recent.durable_lsn), False)
        if done != at.after_lsn or skip != at.skip:
            self.position = Position(done)
        self._checking_window = False  # caught up: nothing it missed was too old
        if not self.ready_sent:
            self._current(events, self.position.after_lsn)
        return Taken(events, False)

    def _current(self, events: list[Event], lsn: int) -> list[Event]:
        """The stream stands at `lsn` and is current: `ready`."""
        self.position = Position(max(lsn, self.position.after_lsn))
        self.ready_sent = True
        events.append(Event(self.position.event_id(), READY, b"{}"))
        return events

    def _reset(self, events: list[Event], lsn: int) -> list[Event]:
        """The stream lost its place or the data changed as a whole: `reset`, then `ready`."""
        self._checking_window = False
        self.position = Position(lsn)
        events.append(Event(str(lsn), RESET, b"{}"))
        return self._current(events, lsn)
