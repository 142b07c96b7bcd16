"""The step the subscribers of a shared live query take together (`SharedSteps`, a base of
`live_queries.SubscriptionManager`): the first of them a commit wakes runs the query again
(`live_runs.LiveRuns.rerun`) and keeps its step, the new answer and the change to it from
the answer they held; the others take that step without a run, one by one in their own
`rerun`, or the streams of one pass all at once (`take_steps`)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from refimpl.engine.features.live_answers import (
    LiveAnswer,
    LiveChange,
    Reply,
    Subscription,
    Version,
)
from refimpl.engine.features.live_kept import KEPT_VERSIONS, KeptSubscriptions
from refimpl.engine.features.live_pass import PassReads, shown_durable
from refimpl.engine.measures import LiveCounts
from refimpl.errors import KdbError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from refimpl.engine.features.live_wait import LiveWait

# Steps from one answer to the next kept for the other subscribers of the query a commit
# wakes (`LiveRuns._next_answer`): a few per query woken at once, a few queries at once.
STEPS_KEPT = 64

# A shared query's step from one answer: the next answer, the change to it (None: the same
# rows) and the row-id floor the run read with it.
Step = tuple[LiveAnswer, LiveChange | None, int]


class SharedSteps(KeptSubscriptions):
    """The kept subscriptions (`KeptSubscriptions`), the steps their shared queries took
    (`_steps`, by database, query, offsets and the serial of the answer stepped from) and
    what the live queries counted (`counts`); `closed` once the server shuts down."""

    def __init__(self, limit: int, idle_seconds: float, per_user: int, rows_per_user: int) -> None:
        super().__init__(limit, idle_seconds, per_user, rows_per_user)
        self.closed = False  # (read at every woken wait: an attribute, not a property)
        self.counts = LiveCounts()  # read by `measures` for /metrics
        # The last step of each shared query from each answer (`_keep_step`): written
        # under `_steps_lock`, read without it (a dict's read is whole under a write).
        self._steps: dict[tuple, Step] = {}
        self._steps_lock = threading.Lock()

    def _keep_step(self, key: tuple, step: Step) -> None:
        """`step` as the last one from the answer of `key`; the oldest go past STEPS_KEPT."""
        with self._steps_lock:
            steps = self._steps
            steps.pop(key, None)  # the newest last, the oldest first out
            steps[key] = step
            if len(steps) > STEPS_KEPT:
                del steps[next(iter(steps))]

    def take_steps(
        self, waits: Iterable[LiveWait], reads: PassReads
    ) -> tuple[Reply | None, list[int]]:
        """The pass's waits of streams that go on (`waits`, in the pass of `reads`) that take
        the step another subscriber of their query made in it (`rerun`'s shared step), in one
        call: the `rows` reply `attempt(keep=True)` would give the first (None: none took
        it), and the version each took, in order, its wait going on (as `follow` gives it
        back: `goes_on`), the others' replies being the first's but for their subscription
        and version. The list ends, untouched, at the first wait that does not take the step
        the first took (none made, nothing moved or changed, another query or answer held,
        a request of its client took over, its subscription dropped, its right to read
        refused, ...): its caller attempts that one the usual way, which answers it, and
        may then call this again for those after it. All of them show one state of one
        database: `reads.shown` is set as one part's making sets it (`shown_durable`)."""
        versions: list[int] = []
        if self.closed or reads.failures:
            return None, versions  # each attempted the usual way: it answers that
        kept = self._subscriptions
        waiting = iter(waits)
        first = next(waiting, None)
        if first is None:
            return None, versions
        subscription = first.subscription
        database, select, top = subscription.database, subscription.select, subscription.top
        with subscription.lock:  # (its versions change under it; read again in the loop)
            held = subscription.newest.answer
        key = (database, select, top is not None, held.serial)
        taken = self._steps.get(key) if subscription.shared else None
        if taken is None:
            return None, versions
        answer, change, floor = taken
        if change is None:
            return None, versions
        counter = reads.counter(subscription)  # the same for all: the same query
        if counter != answer.token:
            return None, versions
        table = subscription.table
        shown_durable(database, reads)  # (as `rerun` does: once for all)
        principal = None  # the last principal but the admin whose right was checked, at `access`
        access = -1
        position, token = answer.position, answer.token
        rows = len(answer.rows)
        # The version last kept: the next subscription of the same number keeps the same
        # object (subscriptions that began together count alike: a hundred, one Version).
        kept_version = Version(0, answer)
        # Marked asked once the parts are sent, all in one entry (`PassReads.asked`).
        taking: list[Subscription] = []
        reads.asked.append((self, taking))
        add_version, took = versions.append, taking.append
        wait: LiveWait | None = first
        while wait is not None:
            subscription = wait.subscription
            session = wait.session
            if (
                subscription.select is not select
                or subscription.top is not top
                or subscription.database is not database
                or session.database is not database
                or kept.get(subscription.id) is not subscription
            ):
                break
            who = session.principal
            if not who.is_admin:  # (the admin holds every right: `PassReads.authorize_read`)
                # The version read before the check, as `PassReads.authorize_read` reads it:
                # a REVOKE made meanwhile leaves the check kept under a version no later one
                # reads.
                rights_at = session.access.version
                if who is not principal or rights_at != access:
                    try:
                        reads.authorize_read(session, table)
                    except KdbError:
                        break  # refused by its usual attempt, which ends its stream
                    principal, access = who, rights_at
            # Its lock by `acquire` and `release`: a `with` binds its two methods each time.
            lock = subscription.lock
            lock.acquire()
            try:
                before = subscription.newest
                # The state its usual attempt would read is the step's (`rerun`'s test), and
                # the wait is still its client's (`LiveWait.holds`, in line).
                waker = wait.waker
                if (
                    before.answer is not held
                    or subscription.token == counter  # (as its attempt's test: not moved)
                    or database.applied_lsn != position
                    or waker is None
                    or subscription.waiting is not waker
                    or subscription.generation != wait.generation
                ):
                    break
                subscription.token = token
                subscription.position = position
                subscription.rowid_floor = floor
                version = before.version + 1
                if kept_version.version != version:
                    kept_version = Version(version, answer)
                # `_keep_version`'s, in line: one in, so one out past KEPT_VERSIONS.
                held_versions = subscription.versions
                held_versions[version] = subscription.newest = kept_version
                grown = rows
                if len(held_versions) > KEPT_VERSIONS:
                    grown -= len(held_versions.popitem(False)[1].answer.rows)
                if grown:
                    self._kept_changed(subscription, grown)
            finally:
                lock.release()
            add_version(version)
            took(subscription)
            wait = next(waiting, None)
        if not versions:
            return None, versions
        reads.steps_taken.append((self.counts, database.name, len(versions)))
        return Reply("rows", first.subscription, versions[0], change), versions
