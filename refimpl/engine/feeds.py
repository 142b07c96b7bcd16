"""The change features as a protocol layer calls them: typed, with no lock or log in sight.

The HTTP layer (and the coming PostgreSQL protocol) reads a table's change stream, its
revisions and the databases' statistics through `ChangeFeeds`; it never takes an engine lock
or reads `tables`, `log` or `commits` itself. What a caller may rely on:

- `table_feed` checks that the caller may read the table, then that it exists (so that a
  caller without READ learns nothing of what exists), and describes it once;
  `TableFeed.read` then reads a page of the change stream from the log, never past
  the durable LSN (`TableFeed.bounds` first: an answer never claims less than it holds);
- `TableFeed.signal` is what a request waiting for the next commit parks on;
- `revisions` reads in-memory revisions only: no lock, no scan, so it answers at once even
  while a long transaction or a bulk import holds the database;
- `work_budget()` is the budget a waiter's own work runs within (a filter, a re-run, a copy
  page): inside it, the evaluation stops with StatementTimeout once the server's
  statement timeout has passed since it was entered.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from refimpl.engine.access import Principal
from refimpl.engine.features.change_stream import (
    ChangeBatch,
    RunBatch,
    RunPieces,
    read_runs,
)
from refimpl.engine.features.feed_options import FeedFilter, FeedOptions, ShapedBatch, shape_changes
from refimpl.engine.features.initial_copy import CopyPosition, InitialBatch, read_initial
from refimpl.engine.instance import Instance
from refimpl.engine.query import deadlines
from refimpl.engine.rights import READ
from refimpl.engine.storage.database import Database
from refimpl.engine.storage.schema import TableSchema
from refimpl.engine.tracking.signals import CommitSignal
from refimpl.errors import BadRequest, NotFound, TooManyRequests, UnknownDatabase

SHAPED_READ_FACTOR = 10
COPY_PAGES_PER_USER = 2  # pages of initial copies one user's requests read at once
# Tables of one database whose feed descriptions are kept (a name asked for is kept only
# while its table exists); past this many the kept ones are dropped and made again.
KEPT_FEEDS = 1024
KEPT_FILTERS = 64  # compiled `where=` predicates kept per table feed


@dataclass(frozen=True, slots=True)
class LogBounds:
    """The log as of one moment: nothing past `durable_lsn` is shown, nothing before
    `oldest_lsn` is kept."""

    durable_lsn: int
    oldest_lsn: int


@dataclass(frozen=True, slots=True)
class TableFeed:
    """One readable table's change stream, described when it was opened."""

    database: str
    table: str
    column_names: tuple[str, ...]
    column_types: dict[str, str]
    _database: Database
    _schema: TableSchema
    # `name:type` of each column: strings hash in C and keep their hash (a shared answer's
    # key holds it, made again at every attempt of every parked reader).
    signature: tuple[str, ...] = ()
    # The table's compiled `where=` predicates by their text (a FeedFilter is immutable and
    # compiled for this schema alone, so every reader of the table may share it).
    _filters: dict[str, FeedFilter] = field(default_factory=dict, compare=False, repr=False)

    @property
    def signal(self) -> CommitSignal:
        """Advances at each durable commit of the table's database."""
        return self._database.commits

    def published_lsn(self) -> int:
        """The durable LSN the signal last published (a waiter's starting point)."""
        return self._database.commits.lsn

    def outdated(self) -> bool:
        """True when the table still exists with another schema than this description's
        (an ALTER TABLE since): its rows are then read with columns this feed lacks. A
        dropped table is not outdated: its feed reads on to its `ddl` change."""
        stored = self._database.tables.get(self.table.lower())
        return stored is not None and stored.schema is not self._schema

    def bounds(self) -> LogBounds:
        log = self._database.log
        return LogBounds(log.durable_lsn, log.oldest_lsn)

    def read(self, after_lsn: int, limit: int) -> ChangeBatch:
        """Changes after `after_lsn`, at most `limit` rows, whole transactions (see the spec)."""
        return self.read_runs(after_lsn, limit).change_batch()

    def read_runs(self, after_lsn: int, limit: int) -> RunBatch:
        """`read` as runs of the log's changes (`ChangeRun`): no object per change."""
        return read_runs(self._database, self._schema.name, self._schema, after_lsn, limit)

    def read_pieces(self, after_lsn: int, limit: int) -> RunPieces:
        """`read_runs` read as it is used, a piece at a time (see `RunPieces`)."""
        return RunPieces(self._database, self._schema.name, self._schema, after_lsn, limit)

    @property
    def before_images(self) -> bool:
        """The table logs the row before each update and delete (REPLICA IDENTITY FULL)."""
        return self._schema.replica_identity_full

    def read_initial(
        self, at: CopyPosition | None, limit: int, feed_filter: FeedFilter | None
    ) -> InitialBatch:
        """The next page of an `initial=true` feed inside its copy (see `initial_copy`)."""
        return read_initial(self._database, self._schema, at, limit, feed_filter)

    def compile_filter(self, predicate: str) -> FeedFilter:
        """A `where=` predicate checked against this table (SqlError with its position);
        compiled once per text while the table's schema stands."""
        kept = self._filters.get(predicate)
        if kept is None:
            kept = FeedFilter.compile(self._schema, predicate)  # an error is not kept
            if len(self._filters) >= KEPT_FILTERS:
                self._filters.clear()
            self._filters[predicate] = kept
        return kept

    def read_shaped(
        self, after_lsn: int, limit: int, options: FeedOptions, feed_filter: FeedFilter | None
    ) -> ShapedBatch:
        """`read` with the options applied; `limit` counts the changes after filtering and
        squashing, read on (whole transactions) up to `SHAPED_READ_FACTOR` times `limit`
        changes of the log; `next_lsn` always ends a transaction."""
        budget = limit * SHAPED_READ_FACTOR
        batch = self.read(after_lsn, limit)
        shaped = shape_changes(batch, self._schema, options, feed_filter)
        while batch.more and len(shaped.changes) < limit and shaped.read < budget:
            page = self.read(batch.next_lsn, limit)
            batch = ChangeBatch(batch.changes + page.changes, page.next_lsn, page.more)
            shaped = shape_changes(batch, self._schema, options, feed_filter)
        return shaped


@dataclass(frozen=True, slots=True)
class _Described:
    """What a table's feed keeps between requests while its schema object stands: nothing
    that refers to the database (the database is the key it is kept under, weakly)."""

    schema: TableSchema
    column_types: dict[str, str]
    signature: tuple[str, ...]
    filters: dict[str, FeedFilter]


@dataclass(frozen=True, slots=True)
class FeedRequest:
    """What a reader of one table's change stream asks, as the protocol layer read it."""

    table: str
    options: FeedOptions
    position: CopyPosition | int  # an LSN (0: the start), or a place inside an initial copy
    limit: int

    @property
    def in_copy(self) -> bool:
        """Inside an initial copy (its start, or a place in it): a page of the table's rows
        and the changes between pages, answered at once (`TableFeed.read_initial`)."""
        position = self.position
        return self.options.initial and (isinstance(position, CopyPosition) or position == 0)


@dataclass(frozen=True, slots=True)
class FeedPlan:
    """How a request past any initial copy is answered: a page from `start`, read as runs of
    the log (a plain feed) or change by change with the options applied (`shaped`: options,
    or a table with before-images, whose answers show `old_row`)."""

    feed: TableFeed
    start: int
    limit: int
    options: FeedOptions
    feed_filter: FeedFilter | None
    shaped: bool
    ready: bool  # states asked at the feed's start: `ready` comes first
    hold_s: float  # squash=<seconds> on a resumed read: the answer waits that long for more

    def share_key(self, *more: Hashable) -> tuple[Hashable, ...]:
        """Equal for requests that get the same answer (with `more`: the protocol layer's
        own, its format and the durable LSN the answer was made at)."""
        feed = self.feed
        key: tuple[Hashable, ...] = (feed.database, feed.table.lower(), feed.signature)
        key += (self.start, self.limit, *more)
        if self.shaped:
            key += (feed.before_images, self.options, self.ready)
        return key

    def read(self) -> RunPieces | ShapedBatch:
        """The page: a plain feed's read as it is used (encoded a piece at a time), a shaped
        one's whole (see `found`)."""
        if self.shaped:
            return self.feed.read_shaped(self.start, self.limit, self.options, self.feed_filter)
        return self.feed.read_pieces(self.start, self.limit)

    def found(self, page: RunPieces | ShapedBatch) -> bool:
        """Whether the page holds anything to answer now (a change, or `ready`): of a plain
        feed's page, known once it was used to its end."""
        if isinstance(page, ShapedBatch):
            return bool(page.changes) or self.ready
        return page.rows > 0


@dataclass(frozen=True, slots=True)
class RevisionAnswer:
    """What `GET /api/rev` answers: a table's revision and those of values of its rev
    column."""

    database: str
    table: str
    column: str | None
    boot: str
    table_rev: str
    revs: dict[Any, str]


class ChangeFeeds:
    """The change features of one instance, for protocol layers."""

    def __init__(self, instance: Instance) -> None:
        self._instance = instance
        self._copy_lock = threading.Lock()
        self._copying: dict[str | None, int] = {}  # initial-copy pages read now, by user
        # Each database's tables described by lower-case table name, each kept while its
        # table's schema object stands (a schema change makes a new one): describing a table
        # is then one dictionary lookup per request. Weak: a dropped database's go with it.
        self._described: weakref.WeakKeyDictionary[Database, dict[str, _Described]] = (
            weakref.WeakKeyDictionary()
        )

    @contextmanager
    def copy_page(self, principal: Principal, limit: int) -> Iterator[None]:
        """While inside, one page of an initial copy of `principal`'s is being read, within
        the statement timeout: BadRequest for a `limit` over `copy_page_rows`,
        TooManyRequests when the user reads COPY_PAGES_PER_USER pages already."""
        most = self._instance.options.copy_page_rows
        if limit > most:
            raise BadRequest(
                f"limit {limit} is over copy_page_rows ({most}): a page of an initial copy"
                f" holds at most {most} rows; ask for a smaller limit and read on from next"
            )
        user = principal.name
        with self._copy_lock:
            reading = self._copying.get(user, 0)
            if reading >= COPY_PAGES_PER_USER:
                raise TooManyRequests(
                    f"{principal.describe()}: {reading} pages of initial copies are being read"
                    " at once already, the most one user may; ask again when one is answered",
                    retry_after=1,
                )
            self._copying[user] = reading + 1
        try:
            with self.work_budget():
                yield
        finally:
            with self._copy_lock:
                left = self._copying[user] - 1
                if left:
                    self._copying[user] = left
                else:
                    del self._copying[user]

    def work_budget(self) -> deadlines.running:
        """While inside, evaluation on this thread stops at the statement timeout from now
        (`refimpl.engine.query.deadlines`)."""
        at = time.monotonic() + self._instance.options.statement_timeout
        return deadlines.running(_Deadline(at), bulk=True)

    def table_feed(self, database: str, table: str, principal: Principal) -> TableFeed:
        """The change stream of `table`; Unauthorized or Forbidden before UnknownDatabase or
        NotFound, so that only a caller with READ on the database learns what exists."""
        self._instance.access.check(principal, database, READ, table)
        found = self._instance.database(database)
        key = table.lower()
        # A plain dict read: atomic, and never behind a reader that holds the state lock (a
        # commit installs a schema change by replacing the table, so the read sees the table
        # before or after it, never half of it).
        stored = found.tables.get(key)
        if stored is None:
            raise _no_table(table, found.name)
        schema = stored.schema
        kept = self._described.get(found)
        if kept is None:
            kept = self._described.setdefault(found, {})
        described = kept.get(key)
        if described is None or described.schema is not schema:
            types = {c.name: c.type for c in schema.columns}
            signature = tuple(f"{name}:{types[name]}" for name in schema.column_names)
            described = _Described(schema, types, signature, {})
            if len(kept) >= KEPT_FEEDS:
                kept.clear()
            kept[key] = described
        return TableFeed(
            found.name,
            schema.name,
            schema.column_names,
            described.column_types,
            found,
            schema,
            described.signature,
            described.filters,
        )

    def plan(self, database: str, request: FeedRequest, principal: Principal) -> FeedPlan:
        """How to answer `request` past any initial copy (see `FeedPlan`): the table's feed
        (rights before existence, as `table_feed`), then its `where=` checked against it."""
        assert not request.in_copy
        start = request.position
        assert isinstance(start, int)
        feed = self.table_feed(database, request.table, principal)
        options = request.options
        where = options.where
        return FeedPlan(
            feed,
            start,
            request.limit,
            options,
            None if where is None else feed.compile_filter(where),
            feed.before_images or not options.plain,
            options.states and start == 0,
            options.squash_seconds if start > 0 else 0.0,
        )

    def current(
        self, plan: FeedPlan, database: str, request: FeedRequest, principal: Principal
    ) -> FeedPlan:
        """`plan`, or `request` planned again when the table's schema changed since `plan`
        was made (a request that waited across an ALTER TABLE): rights checked again, its
        `where=` compiled against the new columns (SqlError if it names one gone)."""
        if not plan.feed.outdated():
            return plan
        return self.plan(database, request, principal)

    def revisions(
        self,
        database: str,
        table: str,
        principal: Principal,
        column: str | None,
        symbols: Sequence[str],
    ) -> RevisionAnswer:
        """The table's revision and its values' (`symbols`); 401/403, 404 or 400 as the
        spec says, in that order (rights before existence, as `table_feed`)."""
        self._instance.access.check(principal, database, READ, table)
        found = self._instance.database(database)
        # A plain dict read: atomic, and never behind a reader that holds the state lock.
        stored = found.tables.get(table.lower())
        if stored is None:
            raise _no_table(table, found.name)
        schema = stored.schema
        rev_column = schema.rev_column
        if column is not None:
            if rev_column is None:
                raise BadRequest(
                    f"table '{schema.name}' keeps no revisions per value (it has no rev"
                    " column); ask without 'column' for its table_rev"
                )
            if column.lower() != rev_column.lower():
                raise BadRequest(
                    f"table '{schema.name}' keeps revisions per value of column"
                    f" '{rev_column}', not '{column}'"
                )
        revisions = found.revisions
        return RevisionAnswer(
            found.name,
            schema.name,
            rev_column,
            revisions.boot,
            revisions.table_rev(schema.name),
            revisions.value_revs(schema.name, list(symbols)),
        )

    def readable_stats(self, principal: Principal, database: str | None) -> dict[str, object]:
        """Statistics of each database the caller may read: all, or only `database`."""
        instance = self._instance
        names = instance.database_names()
        if database is not None:
            instance.access.check(principal, database, READ)  # before existence
            wanted = [n for n in names if n.casefold() == database.casefold()]
            if not wanted:
                raise UnknownDatabase(database)
        else:
            wanted = [n for n in names if instance.access.allowed(principal, n, READ)]
        stats = instance.stats().get("databases", {})
        return {n: stats.get(n, {}) for n in wanted}


class _Deadline:
    """A fixed deadline, for work that is no session's statement; and a polite one.

    Asked at every row of a filter and every few hundred candidates of a LIKE, it makes way
    (`deadlines.make_way`): a waiter's own work is a background thread's, it lets the
    interpreter lock go every few milliseconds and takes turns with the other long work,
    and the threads that answer everyone else (the waiting room, the workers) never queue
    behind it for the lock (they each waited the switch interval, again at every step of
    a commit, so one user's filter held everyone's commits for seconds)."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at

    def statement_deadline(self) -> float:
        deadlines.make_way()
        return self.at


def _no_table(table: str, database: str) -> NotFound:
    return NotFound(f"table '{table}' does not exist in database '{database}'")
