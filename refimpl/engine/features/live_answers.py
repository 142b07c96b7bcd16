"""What a live query's subscriptions hold and answer: answers (each marked with the state
it includes), versions, changes between two answers, replies, subscriptions. See
`live_queries` for how they are made and shared."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refimpl.engine.features.buckets import BucketPlan
from refimpl.engine.features.top_n import Move, TopPlan, moves, run_in_table_order
from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column
from refimpl.engine.statements import executor
from refimpl.engine.tracking.signals import Waker
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database

Identity = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Delta:
    """How a maintained answer differs from the answer named `base` (its serial): the
    identities of its rows that are new or changed (in the answer's order), and of those
    that left."""

    base: int
    changed: list[Identity]
    removed: list[Identity]


@dataclass(frozen=True, slots=True)
class LiveAnswer:
    """The rows of one run of a query (identity -> row, in the query's order); `serial`
    names it, so that subscriptions holding the same answer are seen to. `delta`, on an
    answer a maintainer made from the one before, spares comparing the two whole."""

    serial: int
    rows: dict[Identity, tuple]
    # The state the answer includes: every commit up to `position` (an applied LSN) and so
    # the revision counter `token` of what the query reads; a subscriber holding this answer
    # is marked with these two, never with a revision read at another moment.
    position: int = 0
    token: int = -1
    delta: Delta | None = None


@dataclass(slots=True)
class Version:
    version: int
    answer: LiveAnswer

    @property
    def rows(self) -> dict[Identity, tuple]:
        return self.answer.rows


@dataclass(slots=True)
class LiveChange:
    """What a client applies between two answers; shared by every subscription that had
    the same two answers. `encoded` is a memo for a protocol layer: what it made of this
    change, made once for all of them (keyed by the layer's own names)."""

    rows: list[tuple]
    removed_keys: list[Identity]
    moves: list[Move] | None
    encoded: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class Reply:
    """What one request answers: `kind` snapshot, rows, or none (nothing changed).

    A snapshot's `rows` are the whole answer; `moves` is None unless the subscription has
    offsets and the kind is rows."""

    kind: str
    subscription: Subscription
    version: int
    change: LiveChange = field(default_factory=lambda: LiveChange([], [], None))

    @property
    def rows(self) -> list[tuple]:
        return self.change.rows

    @property
    def removed_keys(self) -> list[Identity]:
        return self.change.removed_keys

    @property
    def moves(self) -> list[Move] | None:
        return self.change.moves

    @property
    def id(self) -> str:
        return f"{self.subscription.id}.{self.version}"


@dataclass(slots=True)
class Subscription:
    id: str
    database: Database
    owner: str | None
    text: str
    select: ast.Select
    table: str
    symbol: Any
    columns: list[Column]
    key_columns: list[str]
    identity: Callable[[tuple], Identity]
    whole_row: bool
    buckets: BucketPlan | None = None  # how to re-run only changed time buckets
    shared: bool = True  # deterministic: its run at one state serves every subscriber
    top: TopPlan | None = None  # with offsets: the query in its total order
    maintained: bool = False  # its answer is kept up to date commit by commit (live_maintain)
    position: int | None = None  # the applied LSN the last answer includes
    rowid_floor: int = 0  # a logged row id below it is an update of a row the answer holds
    token: int = -1
    versions: OrderedDict[int, Version] = field(default_factory=OrderedDict)
    # The last of `versions`, set with it (a snapshot's first, `_keep_version`, `take_steps`):
    # read at every step, where `next(reversed(versions))` made an iterator each time.
    newest: Version = field(init=False, repr=False, compare=False)
    last_asked: float = field(default_factory=time.monotonic)
    generation: int = 0
    waiting: Waker | None = None  # the request waiting for a change, if any
    kept: int = 0  # rows its versions keep, as last counted against its owner
    lock: threading.Lock = field(default_factory=threading.Lock)
    # (database, table, symbol): what its revision counter is kept by in a pass
    # (`PassReads.counter`), made once, not at each of its commits.
    state_key: tuple[Database, str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.state_key = (self.database, self.table, self.symbol)

    @property
    def current(self) -> Version:
        return self.newest

    def counter(self) -> int:
        """The revision counter of what the query reads (its pinned value, or the table)."""
        revisions = self.database.revisions
        if self.symbol is not None:
            return revisions.value_n(self.table, self.symbol)
        return revisions.table_n(self.table)

    def moved(self) -> bool:
        """True when a commit its answer does not include touched its query."""
        return self.counter() != self.token

    def next_rowid(self) -> int:
        """Row ids below this were handed out before now (read after an answer: its floor)."""
        table = self.database.tables.get(self.table)
        return table.next_rowid if table is not None else 0


def run_query(session: StatementContext, select: ast.Select, top: TopPlan | None) -> QueryOutput:
    """A live query's run: `select`, or with offsets `top`'s query, read in the table's
    order when that is the query's (never a sort of the whole table)."""
    if top is not None and top.in_table_order:
        return run_in_table_order(session, top)
    return executor.select_rows(session, select, ())


def change_between(
    subscription: Subscription, older: LiveAnswer, newer: LiveAnswer
) -> LiveChange | None:
    """What a client applies to go from answer `old` to `new`; None when nothing changed
    (with offsets: nor the order, which columns outside the select list may move)."""
    delta = newer.delta
    if delta is not None and delta.base == older.serial and subscription.top is None:
        # A maintainer made `newer` from `older`: it knows what changed.
        if not delta.changed and not delta.removed:
            return None
        return LiveChange([newer.rows[i] for i in delta.changed], list(delta.removed), None)
    old, new = older.rows, newer.rows
    changed = [row for ident, row in new.items() if old.get(ident) != row]
    removed = [ident for ident in old if ident not in new]
    if subscription.whole_row:
        removed = [ident[:-1] for ident in removed]  # a row: remove one equal row
    order = moves(old, new) if subscription.top is not None else None
    if not changed and not removed and not order:
        return None
    return LiveChange(changed, removed, order)


class StateReads:
    """The state a live query's answer is read at: the revision counter of what it reads
    (its pinned value, or the table) and the applied LSN, a pair of one moment. A commit
    moves the counter and then the applied LSN in its exclusive hold of the state lock (and
    wakes its subscribers in between), so the pair is read under that lock; read apart,
    they could name two states, and an answer of the older one marked with the newer
    counter would be lost until the next commit.

    The pair last read under the lock is kept for each (database, table, value): a reader
    that then reads the counter and the applied LSN, in that order and without the lock,
    and finds both as kept reads that same state (no commit ended since, and none under way
    has moved the counter: it would wake the reader again when it has). The subscribers of
    one value that a commit wakes thus take the lock once, not once each."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._lock = threading.Lock()
        # By the database object (kept alive by the key, as the shared answers are), the
        # table and the value. In the order first read: the oldest goes past `size`.
        self._kept: dict[tuple[Database, str, Any], tuple[int, int]] = {}

    def read(
        self,
        subscription: Subscription,
        counter: Callable[[Subscription], int],
        read: int | None = None,
    ) -> tuple[int, int]:
        """(counter, applied LSN) of one state at least as new as `read`'s read, else as
        the call; `counter` reads the subscription's revision counter, `read` is what it
        gave the caller just before (the counter is then not read again: it is still read
        before the applied LSN, which is all the lock-free look needs)."""
        database = subscription.database
        key = (database, subscription.table, subscription.symbol)
        kept = self._kept.get(key)  # a dict's read: whole under another's write
        if kept is not None:
            if read is None:
                read = counter(subscription)
            if (read, database.applied_lsn) == kept:
                return kept
        with database.state_lock:
            state = (counter(subscription), database.applied_lsn)
        with self._lock:
            every = self._kept
            every[key] = state
            if len(every) > self._size:
                del every[next(iter(every))]
        return state
