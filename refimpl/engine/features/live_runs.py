"""A live query's runs: its answer at the state read now (run once for every subscriber of
a shared query at one state: `SharedResults`), the change between two answers (one for
the subscriptions that had the same two), and `rerun`, the step a commit makes, shared by
the subscribers of a query that held one answer (`live_steps`). `LiveRuns` is a base of
`live_queries.SubscriptionManager`."""

from __future__ import annotations

import itertools
from contextlib import nullcontext
from typing import TYPE_CHECKING

from refimpl.engine.features.live_answers import (
    Identity,
    LiveAnswer,
    LiveChange,
    Reply,
    StateReads,
    Subscription,
    Version,
    change_between,
    run_query,
)
from refimpl.engine.features.live_buckets import changed_buckets_rows
from refimpl.engine.features.live_maintainers import Maintainers
from refimpl.engine.features.live_pass import PassReads, authorize_read, shown_durable
from refimpl.engine.features.live_steps import SharedSteps
from refimpl.engine.features.live_wait import Budget
from refimpl.engine.rights import READ
from refimpl.engine.tracking.shared_results import SharedResults
from refimpl.errors import ResultTooLarge

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

MAX_ROWS = 10_000


class LiveRuns(SharedSteps):
    """The runs of the live queries of one server, their answers and the changes between
    them, shared where their subscribers would get the same."""

    def __init__(self, limit: int, idle_seconds: float, per_user: int, rows_per_user: int) -> None:
        super().__init__(limit, idle_seconds, per_user, rows_per_user)
        self._shared = SharedResults()
        # Shared only among the subscribers one commit wakes (within moments): a few kept.
        self._answers = SharedResults(size=64)
        self._states = StateReads()
        self._serials = itertools.count(1)
        self._maintainers = Maintainers(max_rows=MAX_ROWS)

    def _run(
        self,
        session: StatementContext,
        subscription: Subscription,
        counter: int | None = None,
        reads: PassReads | None = None,
    ) -> LiveAnswer:
        """The answer at the state read now (`counter`: the revision counter the caller
        read just before, `counter_of`'s; `reads`: the pass's, as `rerun`'s)."""
        database = subscription.database
        # The revision and the applied LSN of one state (`StateReads`), read before the
        # query: work may be redone, never missed.
        token, applied = self._states.read(subscription, self.counter_of, counter)
        # The answer is the same for every subscriber of this query at this state (each
        # must still be allowed to read the table): one run serves all of them.
        authorize_read(session, subscription.table, reads)
        if subscription.shared:
            # By the database object, not its id(): a dropped one's id reused serves nothing.
            answer = self._answers.get(
                (database, subscription.select, applied, token),
                lambda: self._answer(session, subscription, applied, token),
            )
        else:
            answer = self._answer(session, subscription, applied, token)
        # Made from the state (or the log's newest records) before they may be durable.
        shown_durable(database, reads)
        subscription.token = answer.token
        subscription.position = answer.position
        subscription.rowid_floor = subscription.next_rowid()
        return answer

    counter_of = staticmethod(Subscription.counter)  # the revision counter it reads

    def _answer(
        self, session: StatementContext, subscription: Subscription, applied: int, token: int
    ) -> LiveAnswer:
        """The answer at least as new as the state (`applied`, `token`), marked with it."""
        if subscription.maintained:
            kept = self._maintainers.answer(
                session, subscription.select, applied, token, self._serials.__next__
            )
            if kept is not None:
                return kept
            subscription.maintained = False  # its table changed shape, or it grew too big
        partial = changed_buckets_rows(self._shared, session, subscription, applied, MAX_ROWS)
        if partial is not None:
            return LiveAnswer(next(self._serials), partial, applied, token)
        output = run_query(session, subscription.select, subscription.top)
        if len(output.rows) > MAX_ROWS:
            raise ResultTooLarge(
                f"a subscription answers at most {MAX_ROWS} rows and this one has"
                f" {len(output.rows)}; narrow the WHERE or add a LIMIT"
            )
        rows: dict[Identity, tuple] = {}
        if subscription.whole_row:
            seen: dict[tuple, int] = {}
            for row in output.rows:
                count = seen.get(row, 0)
                seen[row] = count + 1
                rows[(*row, count)] = row  # equal rows stay apart by their number
        else:
            identity = subscription.identity
            for row in output.rows:
                rows[identity(row)] = row
        return LiveAnswer(next(self._serials), rows, applied, token)

    def _difference(self, subscription: Subscription, old: Version, new: Version) -> Reply | None:
        change = self._change(subscription, old.answer, new.answer)
        if change is None:
            return None
        self.counts.answered(subscription.database.name, "rows")
        return Reply("rows", subscription, new.version, change)

    def _change(
        self, subscription: Subscription, old: LiveAnswer, new: LiveAnswer
    ) -> LiveChange | None:
        # Subscriptions that had the same two answers share one change (and its encoding).
        return self._answers.get(
            ("change", subscription.select, subscription.top is not None, old.serial, new.serial),
            lambda: change_between(subscription, old, new),
        )

    def rerun(
        self,
        session: StatementContext,
        subscription: Subscription,
        counter: int | None = None,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> Reply | None:
        """Run the query again after a commit touched it: the difference, or None. `counter`:
        `counter_of`'s, read by the caller just before (or the pass's, `PassReads.counter`);
        `budget`: a run's, if one is due; `reads`: the reads of the pass it is made in.

        The subscribers of a shared query that held one answer and are woken by one commit
        take one step: the first keeps it (`_next_answer`), and the others take it when the
        state they read (the counter, then the applied LSN) is the one its answer was marked
        with (as `StateReads` compares them), their right to read the table checked again,
        without the state's lock or the shared memos."""
        answered = False
        database = subscription.database
        with subscription.lock:
            try:
                before = subscription.newest
                top = subscription.top is not None
                key = (database, subscription.select, top, before.answer.serial)
                taken = self._steps.get(key) if subscription.shared else None
                if (
                    taken is not None
                    and counter == taken[0].token
                    and database.applied_lsn == taken[0].position
                ):
                    answer, change, floor = taken
                    if reads is None:
                        session.authorize(READ, subscription.table)
                    else:  # (`authorize_read`'s, without its call)
                        reads.authorize_read(session, subscription.table)
                    shown_durable(database, reads)  # the pass that made it may not have waited
                    subscription.token = answer.token
                    subscription.position = answer.position
                    subscription.rowid_floor = floor
                else:
                    answer, change = self._next_answer(
                        session, subscription, before.answer, key, counter, budget, reads
                    )
                if change is None:  # no row changed
                    return None
                version = before.version + 1
                self._keep_version(subscription, Version(version, answer))
                answered = True
                return Reply("rows", subscription, version, change)
            finally:  # counted failed or not (a run and its answer in one hold of a lock)
                if reads is None:
                    self.counts.reran(database.name, answered)
                else:  # with the others of the pass, at its end
                    reads.reruns.append((self.counts, database.name, answered))

    def _next_answer(
        self,
        session: StatementContext,
        subscription: Subscription,
        before: LiveAnswer,
        key: tuple,
        counter: int | None,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> tuple[LiveAnswer, LiveChange | None]:
        """The answer at the state read now and the change from `before` to it (None: the
        same rows), as `_run` and `_change` make them (`counter`: as `rerun`'s), kept as the
        step of the subscribers of a shared query that held `before` (`key`, `rerun`'s)."""
        with (budget or nullcontext)():  # the statement timeout from here, and its turns
            answer = self._run(session, subscription, counter, reads)
        if reads is not None:
            reads.saw(subscription, answer.token)  # the others of the pass take this step
        change = None
        if answer.serial != before.serial:
            # Shared by the subscribers that had the same two answers.
            change = self._change(subscription, before, answer)
        if subscription.shared:
            self._keep_step(key, (answer, change, subscription.rowid_floor))
        return answer, change
