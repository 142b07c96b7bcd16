"""What the parts of one pass of woken live-query streams read alike (`PassReads`).

A pass is one job of a user's woken live queries, made one after another on one thread
(the HTTP layer's `Woken`): with a hundred streams of one query woken by one commit, what
each part reads of the revision counters and the access records is the same for all of
them, and the last stream's part waits for every part before it.

Durability: a commit wakes a pass once it is durable (`WakeBoard.register`), so the pass
mostly finds every commit it shows durable. One applied since, not yet durable, is shown
from the committed state and the log's newest records (`recent_records.records_through`):
the pass waits for its flush once, after making every part and before sending any
(`PassReads.settle`); if a database's log fails instead, no part made from it is sent: each
is made again and answers the failure (the parts of the pass's other databases are sent).
Without a pass, an answer waits before it is given (`shown_durable`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from refimpl.engine.rights import READ, Principal

if TYPE_CHECKING:
    from refimpl.engine.features.live_answers import Subscription
    from refimpl.engine.measures import LiveCounts
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database


_MANAGER = itemgetter(0)  # of an `asked` pair


class Toucher(Protocol):
    """What keeps subscriptions by when they were last asked (`SubscriptionManager`)."""

    def touch(self, asked: list[tuple[Toucher, Sequence[Subscription]]], now: float) -> None: ...


class PassReads:
    """Reads shared by the parts of one pass; made for the pass, used by its thread alone.

    - `counter`: the revision counter of what a query reads (its database, table and pinned
      value), read once a pass, or the newer one a run of the pass read since (`saw`). Only
      for a stream whose wait goes on (`LiveWait.attempt(keep=True)`): it was on the wake
      board all along, and a wake-up while its part is made or sent makes one more part
      after it, so a commit that moves the counter after the pass read it is answered by
      the stream's next part, as for a stream made first in the pass. (A long poll's wake-up
      while it is queued is not kept apart: it reads the counter itself, after it.)
    - `authorize_read`: a session's right to read a table, checked once a pass for each
      principal, database and table at one version of the access records (`AccessRules.
      version`: every change of users, tokens or grants moves it, a REVOKE's before its
      answer), so a REVOKE or DROP ends every part made after it. A refusal is not kept:
      each part refused is refused by a check of its own.
    - `reruns`: each run again of the pass, as (counts, database, whether it answered
      rows), counted for the measures (`LiveCounts.reran_many`) when the pass ends: `with
      PassReads() as reads:` around the making of its parts, before they are sent. The
      steps that streams took in one call (`take_steps`), each a run again that answered
      rows, are counted with them, one entry a call: (counts, database, how many).
    - `asked`: (manager, subscriptions) of the parts made, a part's subscription or those
      of the parts made in one call (`take_steps`), marked asked (the newest of its
      manager's, `SubscriptionManager.follow`) by `touch_asked` once the parts are sent, in
      the order they were made, in one hold of each manager's lock: the order a mark at
      each part leaves, a few milliseconds later, and the sends of the parts after it do
      not wait for it.
    - `needs`: the LSN of each database up to which the parts made so far need the log
      durable before any is sent (`shown_durable`); `settle` waits for it, once a pass.
      `shown`: the database whose commits the part being made shows before they may be
      durable (a part shows one database's: its query's), or None (its maker sets it so
      before making it).
    - `failures`: each database whose log failed at `settle`; then every attempt of a
      query of one made with these reads raises its failure (`LiveWait.attempt`), and no
      part made from it may be sent (the parts of the other databases may).
    - `looked`: what the maker of the pass's parts looked at once for all the parts it
      holds alike, by a key of its choosing, and what it found (a stream's token: why the
      stream ends, or "" while the token stands: one look a pass for each token).
    """

    __slots__ = (
        "_counters",
        "_rights",
        "reruns",
        "steps_taken",
        "asked",
        "needs",
        "shown",
        "failures",
        "looked",
    )

    def __init__(self) -> None:
        self._counters: dict[tuple[Database, str, Any], int] = {}
        self._rights: set[tuple[Principal, str, str, int]] = set()
        self.reruns: list[tuple[LiveCounts, str, bool]] = []
        self.steps_taken: list[tuple[LiveCounts, str, int]] = []
        self.asked: list[tuple[Toucher, Sequence[Subscription]]] = []
        self.needs: dict[Database, int] = {}
        self.shown: Database | None = None
        self.failures: dict[Database, Exception] = {}
        self.looked: dict[Hashable, str] = {}

    def __enter__(self) -> PassReads:
        return self

    def __exit__(self, *exc: object) -> None:
        runs, self.reruns = Counter(self.reruns), []  # (counted in C)
        for (counts, database, answered), count in runs.items():
            counts.reran_many(database, count, count if answered else 0)
        steps, self.steps_taken = self.steps_taken, []
        for counts, database, count in steps:
            counts.reran_many(database, count, count)

    def settle(self) -> dict[Database, Exception]:
        """Once the pass's parts are made, before any is sent: wait until every commit they
        were made from is durable (mostly it is by then: the flush ran meanwhile). The
        databases whose log failed instead, with the failure (also kept in `failures`):
        no part made from one of them may be sent."""
        needs, self.needs = self.needs, {}
        for database, lsn in needs.items():
            try:
                database.log.wait_durable(lsn)
            except Exception as error:  # noqa: BLE001 - WritesStopped: the parts' answer
                self.failures[database] = error
        return self.failures

    def touch_asked(self) -> None:
        """Mark the subscriptions of `asked` asked, once the pass's parts are sent."""
        asked, self.asked = self.asked, []
        if asked:
            now = time.monotonic()
            for manager in set(map(_MANAGER, asked)):  # (in C: one manager, mostly)
                manager.touch(asked, now)

    def counter(self, subscription: Subscription) -> int:
        """The revision counter `subscription`'s query reads (`Subscription.counter`)."""
        counter = self._counters.get(subscription.state_key)
        if counter is None:
            counter = self._counters[subscription.state_key] = subscription.counter()
        return counter

    def saw(self, subscription: Subscription, counter: int) -> None:
        """A run of the pass read the state at `counter` (the counters only rise): the
        streams after it read that, and take the step that run made."""
        key = subscription.state_key
        if self._counters.get(key, -1) < counter:
            self._counters[key] = counter

    def authorize_read(self, session: StatementContext, table: str) -> None:
        """`session.authorize(Right.READ, table)`, checked once a pass (see the class)."""
        principal = session.principal
        if principal.is_admin:
            return  # the admin holds every right (`access.checks.holds_right`)
        # The version read before the records (as a token's check reads it): a change made
        # meanwhile leaves this check kept under a version that no later part reads.
        key = (principal, session.database.name, table, session.access.version)
        if key in self._rights:
            return
        session.authorize(READ, table)
        self._rights.add(key)


def shown_durable(database: Database, reads: PassReads | None) -> None:
    """Before an answer made from `database`'s state now (or from its log's newest records)
    is shown: every commit applied by now is durable, waited for now, or by the pass of
    `reads` before it sends any part (`PassReads.settle`). `WritesStopped` if the log fails."""
    applied = database.applied_lsn
    if database.log.durable_lsn < applied:
        if reads is None:
            database.log.wait_durable(applied)
        else:
            reads.shown = database
            if reads.needs.get(database, 0) < applied:
                reads.needs[database] = applied


def authorize_read(session: StatementContext, table: str, reads: PassReads | None) -> None:
    """The session's right to read `table`: checked now, or once in the pass of `reads`."""
    if reads is None:
        session.authorize(READ, table)
    else:
        reads.authorize_read(session, table)
