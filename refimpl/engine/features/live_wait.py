"""A live-query request that waits for a commit changing its answer (`LiveWait`), made by
`live_queries.SubscriptionManager` for a client holding the current version."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from refimpl.engine.features.live_answers import Reply, Subscription
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.tracking.signals import Waker

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# What a query's run is entered within when one is due (the statement timeout from then on):
# a caller's `ChangeFeeds.work_budget`.
Budget = Callable[[], AbstractContextManager[object]]


class Reruns(Protocol):
    """What a wait uses of its `live_queries.SubscriptionManager`."""

    @property
    def closed(self) -> bool: ...

    def counter_of(self, subscription: Subscription) -> int: ...

    def rerun(
        self,
        session: StatementContext,
        subscription: Subscription,
        counter: int | None = None,
        budget: Budget | None = None,
        reads: PassReads | None = None,
    ) -> Reply | None: ...


class LiveWait:
    """A live-query request that waits for a commit changing its answer, holding no thread.

    `watch(waker)` puts it on the database's wake board: `waker.set()` is called (cheap,
    never blocking) once a commit that touches what the query reads is durable (the wake
    board's `durable`; possibly after the wait ended), when a newer request of the same
    client takes over, and at shutdown; the waker's owner then calls `attempt`. Call
    `attempt` once after `watch` too: a commit between the request's read and the watch is
    then not missed. Exactly one of `attempt` (when it gives a Reply) or `expire` ends it.
    """

    def __init__(
        self,
        manager: Reruns,
        session: StatementContext,
        subscription: Subscription,
        generation: int,
    ) -> None:
        self._manager = manager
        self.session = session
        self.subscription = subscription
        # The subscription's generation it was made at, and its waker while on the wake
        # board: read by `take_steps` in line (`holds`'s test, without its call).
        self.generation = generation
        self.waker: Waker | None = None

    def watch(self, waker: Waker) -> None:
        subscription = self.subscription
        self.waker = waker
        subscription.waiting = waker
        database = subscription.database
        # Woken once the commit is durable (`WakeBoard.register`'s `durable`).
        database.wake_board.register(subscription.table, subscription.symbol, waker, database.log)

    def attempt(
        self, keep: bool = False, budget: Budget | None = None, reads: PassReads | None = None
    ) -> Reply | None:
        """The answer if a commit changed it (or `none` once superseded); None: wait on.
        `keep`: a Reply of a change does not end the wait, which stays on the wake board
        for the next change; its caller asks `goes_on` whether it may wait on with it.
        `budget`: the query's run, when one is due, is within it (`SubscriptionManager.rerun`).
        `reads`: the reads of the pass this attempt is made in (`PassReads`): the right to
        read checked once a pass, and with `keep` the revision counter read once a pass;
        its database's log failure there (`PassReads.failures`) is raised, the answer.
        Without `reads`, a Reply is given once what it shows is durable."""
        subscription = self.subscription
        if reads is not None and reads.failures:
            failure = reads.failures.get(subscription.database)
            if failure is not None:
                raise failure.with_traceback(None)
        if subscription.generation != self.generation or self._manager.closed:
            return self.expire()
        manager = self._manager
        if reads is not None and keep:
            counter = reads.counter(subscription)
        else:
            counter = manager.counter_of(subscription)
        if counter != subscription.token:  # moved: a commit the answer does not include
            # The state read from this counter on: not read a second time.
            reply = manager.rerun(self.session, subscription, counter, budget, reads)
            if reply is not None:
                if not keep:
                    self._end()
                return reply
        return None

    def holds(self) -> bool:
        """Whether this wait is still its client's, on the wake board: no other request of
        the subscription took over, and it has not ended."""
        waker = self.waker
        subscription = self.subscription
        return (
            waker is not None
            and subscription.generation == self.generation
            and subscription.waiting is waker
        )

    def goes_on(self, reply: Reply) -> bool:
        """After `attempt(keep=True)` gave `reply`: True when this wait is the wait for the
        change after it, as a new wait of the same client would be (no other request took
        the subscription over, `reply` is its current version). It was on the wake board
        all along, so no commit since the re-run's read of the revision counter can have
        been missed. False: it has ended (off the board), and a new wait is due."""
        subscription = self.subscription
        if (
            self.waker is not None
            and subscription.generation == self.generation
            and subscription.waiting is self.waker
            and reply.subscription is subscription
            and reply.version == subscription.newest.version  # its current
        ):
            return True
        self._end()
        return False

    def expire(self) -> Reply:
        """Nothing changed in time: the id to ask again with."""
        self._end()
        subscription = self.subscription
        return Reply("none", subscription, subscription.current.version)

    def _end(self) -> None:
        waker, self.waker = self.waker, None
        if waker is None:
            return
        subscription = self.subscription
        subscription.database.wake_board.unregister(subscription.table, subscription.symbol, waker)
        if subscription.waiting is waker:
            subscription.waiting = None
