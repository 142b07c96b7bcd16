"""Live queries: a SELECT's answer, then only the rows a commit changed.

A subscription keeps its last few answers, each a version, as rows by identity. A client
names the version it has (`<subscription>.<version>`):

- the current version: the request waits until a commit touches what the query reads
  (the pinned rev-column value, else the table), runs the query again and answers the rows
  that are new or changed and the identities of the rows that left;
- an older version still kept: it gets the difference to the current one at once, so an
  answer lost on the way is never lost for the client;
- an unknown subscription or a version no longer kept: a fresh snapshot.

Row identity: the GROUP BY key for grouped queries, the table's key for plain ones (when the
select list holds it), the whole row otherwise. A client applies an answer by upserting its
rows by identity and deleting `removed_keys`. With offsets (`top_n`), an answer also holds
the moves that turn the client's ordered list into the new one.

Subscriptions woken by one commit share their work: the same query (the same SELECT, the
same database; each subscriber's right to read the table is checked at its every request)
at the same applied LSN is run once (`SharedResults`), and subscriptions whose last answers
were the same one get one difference, whose encodings a protocol layer keeps with it
(`live_runs`); the first of them a commit wakes keeps its step for the others (`live_steps`).

No answer shows a commit before it is durable: a commit wakes its waits once it is durable
(`WakeBoard.register`); a woken pass that reads a newer commit makes its answers and waits
for that one's flush once before sending them (`live_pass.PassReads.settle`); any other
caller gets a Reply once what it shows is durable (`live_pass.shown_durable`).
"""

from __future__ import annotations

import collections
import secrets
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING

from refimpl.engine.features import buckets
from refimpl.engine.features.live_answers import LiveChange, Reply, Subscription, Version, run_query
from refimpl.engine.features.live_pass import PassReads, shown_durable
from refimpl.engine.features.live_runs import MAX_ROWS, LiveRuns
from refimpl.engine.features.live_shape import ONE_TABLE, identity_positions, parse_subscription
from refimpl.engine.features.live_wait import Budget, LiveWait
from refimpl.engine.features.top_n import top_plan
from refimpl.engine.measures import LiveMeasures
from refimpl.engine.query.cache_keys import pinned_value, shareable
from refimpl.engine.rights import READ
from refimpl.engine.tracking.shared_results import SharedResults
from refimpl.errors import BadRequest, NotAllowed
from refimpl.sql import ast

if TYPE_CHECKING:
    from collections.abc import Collection

    from refimpl.engine.features.live_answers import Identity
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database

# Imported from here by the layers above (what a live query may be, its row limit, its wait).
__all__ = [
    "MAX_ROWS",
    "ONE_TABLE",
    "LiveWait",
    "Reply",
    "SubscriptionManager",
    "parse_subscription",
]

MAX_SUBSCRIPTIONS = 10_000
SUBSCRIPTIONS_PER_USER = 2000  # the default of the setting subscriptions_per_user
# Rows one principal's subscriptions keep, each kept version counted (about 110 bytes a
# row): one user must not hold the server's memory (200 snapshots of 10,000 rows: 218 MB).
ROWS_KEPT_PER_USER = 1_000_000
UNASKED_SECONDS = 120.0  # a subscription nobody asked for this long may be dropped


class SubscriptionManager(LiveRuns):
    """Every subscription of one server; thread-safe.

    Bounded for the server (`limit`) and for each principal (`per_user` subscriptions,
    `rows_per_user` rows kept): over a bound, the subscription asked for longest ago (of the
    server, or of that principal) makes room, so one user never evicts another's. A client
    whose subscription made room gets a fresh snapshot when it asks again.
    """

    def __init__(
        self,
        limit: int = MAX_SUBSCRIPTIONS,
        idle_seconds: float = UNASKED_SECONDS,
        per_user: int = SUBSCRIPTIONS_PER_USER,
        rows_per_user: int = ROWS_KEPT_PER_USER,
    ):
        super().__init__(limit, idle_seconds, per_user, rows_per_user)
        # Every request of a client sends its query again: its shape is checked once.
        self._parsed = SharedResults(size=1024)

    def __len__(self) -> int:
        return len(self._subscriptions)

    def ask(
        self,
        session: StatementContext,
        text: str,
        asked_id: str | None,
        offsets: bool = False,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> Reply | LiveWait:
        """Answer one request of a client (see the module docstring) now, or say how it
        waits for a commit that changes its answer (`LiveWait`). `offsets`: answers carry
        moves (`top_n`); a query it does not fit is a BadRequest quoting the rule. `budget`:
        a snapshot's run, when one is due, is within it (as `rerun`'s); `reads`: as `rerun`'s."""
        select: ast.Select = self._parsed.get(text, lambda: parse_subscription(text))
        # Rights at every request, before anything kept is looked at: an older version's
        # difference is answered from memory, and a REVOKE must end that at once.
        table_name = select.source.name  # type: ignore[union-attr]
        session.authorize(READ, table_name)
        if table_name.lower() in session.database.views:
            raise NotAllowed(f"{ONE_TABLE}; '{table_name}' is a view: subscribe to its tables")
        subscription, version = self._find(session, text, asked_id, offsets)
        step = None if subscription is None else self._step(session, subscription, version, reads)
        if step is not None:
            return step
        with (budget or nullcontext)():
            return self._snapshot(session, text, select, offsets, reads)

    def follow(
        self,
        session: StatementContext,
        reply: Reply,
        checked: bool = False,
        wait: LiveWait | None = None,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> Reply | LiveWait:
        """What `ask` answers for `reply.id`, asked by the client `reply` was just made for
        (a stream's next wait): the same answer and the same check of the session's right
        to read the table, without parsing the query or looking the subscription up by its
        id again. `checked`: `reply` was made by `rerun` for this session just now, which
        checked that right before it read the answer (no second check then: whatever the
        wait answers later is read after a check of its own). `wait`: the wait whose
        `attempt(keep=True)` made `reply`; it is the answer when it `goes_on` (no new wait
        made and put on the wake board), else it has ended. `budget`: as `rerun`'s.
        `reads`: the pass it is made in, which marks the subscription asked once its parts
        are sent (`PassReads.asked`); else it is marked now."""
        subscription = reply.subscription
        if not checked:
            session.authorize(READ, subscription.table)
        # No sweep here (a stream's every change would pay for it): `ask` and snapshots do.
        if reads is None:
            with self._lock:
                kept = self._subscriptions.get(subscription.id) is subscription
                if kept:
                    self._touch(subscription, time.monotonic())
        else:
            # A dict's read is whole under another's write: a drop just after it is as
            # one just after the lock's hold (the part made as the subscription's last).
            kept = self._subscriptions.get(subscription.id) is subscription
            if kept:
                reads.asked.append((self, (subscription,)))
        step = None
        if kept and subscription.database is session.database:
            if wait is not None and wait.goes_on(reply):
                return wait
            step = self._step(session, subscription, reply.version, reads)
        elif wait is not None:
            wait.expire()  # off the wake board: the answer below is another wait's
        if step is None:  # dropped meanwhile, or its version no longer kept: as `ask` does
            with (budget or nullcontext)():
                top = subscription.top is not None
                return self.ask(session, subscription.text, reply.id, top, reads=reads)
        return step

    def _step(
        self,
        session: StatementContext,
        subscription: Subscription,
        version: int,
        reads: PassReads | None = None,
    ) -> Reply | LiveWait | None:
        """The answer to a request holding `version` of `subscription` (whose owner asks):
        the difference to a newer version (`reads`: of the pass it is made in), or the wait
        for one; None when `version` is not kept (a snapshot is due)."""
        with subscription.lock:
            subscription.generation += 1
            generation = subscription.generation
            previous = subscription.waiting
        if previous is not None:
            previous.set()  # the older request of this client ends: this one takes over
        current = subscription.current
        if version not in subscription.versions or version > current.version:
            return None
        if version < current.version:
            reply = self._difference(subscription, subscription.versions[version], current)
            if reply is not None:
                shown_durable(subscription.database, reads)  # a pass may have made `current`
                return reply
        return LiveWait(self, session, subscription, generation)

    def ask_now(
        self, session: StatementContext, text: str, asked_id: str | None, offsets: bool = False
    ) -> Reply:
        """`ask` without waiting: a change already committed is answered, else `none`."""
        step = self.ask(session, text, asked_id, offsets)
        if isinstance(step, Reply):
            return step
        return step.attempt() or step.expire()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            subscriptions = list(self._subscriptions.values())
        for subscription in subscriptions:
            if subscription.waiting is not None:
                subscription.waiting.set()

    @property
    def maintenance_cpu_seconds(self) -> float:
        """CPU time spent bringing maintained answers up to date, since the start (cheap)."""
        return self._maintainers.cpu_seconds

    def stats(self) -> dict[str, int]:
        with self._lock:
            waiting = sum(1 for s in self._subscriptions.values() if s.waiting is not None)
        maintainers = self._maintainers
        return {
            "subscriptions": len(self._subscriptions),
            "waiting": waiting,
            # What bringing maintained answers up to date has cost (spec: subscribe).
            "maintained_answers": maintainers.answers,
            "maintenance_cpu_us": int(maintainers.cpu_seconds * 1_000_000),
            "maintainer_table_reads": maintainers.rebuilds,
        }

    def measures(self, databases: Collection[Database]) -> LiveMeasures:
        """The subscriptions kept now by database, and what they answered and re-ran, for
        exactly the open `databases` (a kept subscription of a dropped one is not counted,
        even when another database took its name)."""
        open_ones = {id(database) for database in databases}
        with self._lock:
            by_database = collections.Counter(
                s.database.name for s in self._subscriptions.values() if id(s.database) in open_ones
            )
        return self.counts.snapshot(by_database).of_databases(d.name for d in databases)

    # -- inner workings ------------------------------------------------------------------

    def _find(
        self, session: StatementContext, text: str, asked_id: str | None, offsets: bool
    ) -> tuple[Subscription | None, int]:
        if not asked_id:
            return None, 0
        name, _, version_text = asked_id.strip().rpartition(".")
        if not name or not version_text.isdigit():
            raise BadRequest(
                f"'{asked_id}' is not a subscription id; send the id of the last answer, as"
                " in abc123.4, or none for a fresh snapshot"
            )
        now = time.monotonic()
        with self._lock:
            self._sweep(now)
            subscription = self._subscriptions.get(name)
            if subscription is None:
                return None, 0
            if (
                subscription.database is not session.database
                or subscription.owner != session.principal.name
                or subscription.text != text
                or (subscription.top is not None) != offsets
            ):
                return None, 0
            self._touch(subscription, now)
        return subscription, int(version_text)

    def _snapshot(
        self,
        session: StatementContext,
        text: str,
        select: ast.Select,
        offsets: bool,
        reads: PassReads | None = None,
    ) -> Reply:
        database = session.database
        table_name = select.source.name  # type: ignore[union-attr]
        top = None
        if offsets:
            top = top_plan(select, database.committed_table(table_name).schema)
            select = top.select
        output = run_query(session, select, top)
        schema = database.tables[table_name.lower()].schema
        positions = identity_positions(select, schema.key_columns)
        key_columns = [output.columns[p].name for p in positions or ()]
        chosen = tuple(positions or ())

        def identity(row: tuple) -> Identity:
            return tuple(row[p] for p in chosen)

        subscription = Subscription(
            id=secrets.token_hex(8),
            database=database,
            owner=session.principal.name,
            text=text,
            select=select,
            table=schema.name.lower(),
            symbol=pinned_value(schema, select.where, ()),
            columns=output.columns,
            key_columns=key_columns,
            identity=identity,
            whole_row=positions is None,
            buckets=buckets.bucket_plan(select, schema, positions),
            shared=shareable(select),
            top=top,
            maintained=self._maintainers.admits(session, select),
        )
        answer = self._run(session, subscription, reads=reads)
        subscription.versions[1] = subscription.newest = Version(1, answer)
        with self._lock:
            self._sweep(time.monotonic())
            while len(self._subscriptions) >= self.limit:
                self._drop(next(iter(self._subscriptions.values())))
            self._add(subscription)
            self._make_room(subscription.owner, subscription)
        self.counts.answered(database.name, "snapshot")
        return Reply("snapshot", subscription, 1, LiveChange(list(answer.rows.values()), [], None))
