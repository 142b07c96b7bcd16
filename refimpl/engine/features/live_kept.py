"""The subscriptions a `live_queries.SubscriptionManager` keeps, and their bounds: by id and
by owner in the order last asked, the rows each owner's versions keep, and the eviction of
those asked for longest ago (`KeptSubscriptions`, the manager's base)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from refimpl.engine.features.live_answers import Subscription, Version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from refimpl.engine.features.live_pass import Toucher

KEPT_VERSIONS = 8  # the versions a subscription keeps: its newest answers


class KeptSubscriptions:
    """Every subscription kept, by id (`_subscriptions`) and by owner (`_owned`), each in the
    order last asked, and the rows each owner's versions keep (`_kept_rows`), within the
    bounds: `limit` for the server, `per_user` subscriptions and `rows_per_user` rows for an
    owner, `idle_seconds` unasked before one may go. `_lock` guards all of it; the methods
    whose names start with an underscore run under it."""

    def __init__(self, limit: int, idle_seconds: float, per_user: int, rows_per_user: int) -> None:
        self.limit = limit
        self.idle_seconds = idle_seconds
        self.per_user = per_user
        self.rows_per_user = rows_per_user
        self._lock = threading.Lock()
        self._subscriptions: OrderedDict[str, Subscription] = OrderedDict()
        # Per owner (None: anonymous), by when last asked; and the rows they keep in all.
        self._owned: dict[str | None, OrderedDict[str, Subscription]] = {}
        self._kept_rows: dict[str | None, int] = {}

    def _sweep(self, now: float) -> None:
        while self._subscriptions:
            oldest = next(iter(self._subscriptions.values()))
            # Over the limit only: at it, asking by id must not evict (a snapshot makes room).
            if now - oldest.last_asked <= self.idle_seconds and len(self._subscriptions) <= (
                self.limit
            ):
                return
            if oldest.waiting is not None and now - oldest.last_asked <= self.idle_seconds:
                return
            self._drop(oldest)

    def touch(self, asked: list[tuple[Toucher, Sequence[Subscription]]], now: float) -> None:
        """Mark the subscriptions `asked` of this manager asked at `now`, in their order,
        those still kept (`PassReads.touch_asked`)."""
        with self._lock:
            kept, owned = self._subscriptions, self._owned
            newest = kept.move_to_end
            for manager, subscriptions in asked:
                if manager is not self:
                    continue
                for subscription in subscriptions:
                    name = subscription.id
                    if kept.get(name) is subscription:
                        subscription.last_asked = now  # as `_touch`, in line: one a part
                        newest(name)
                        owned[subscription.owner].move_to_end(name)

    def _touch(self, subscription: Subscription, now: float) -> None:
        """Asked at `now`: the newest of the server's and of its owner's."""
        subscription.last_asked = now
        self._subscriptions.move_to_end(subscription.id)
        self._owned[subscription.owner].move_to_end(subscription.id)

    def _add(self, subscription: Subscription) -> None:
        self._subscriptions[subscription.id] = subscription
        self._owned.setdefault(subscription.owner, OrderedDict())[subscription.id] = subscription
        self._count(subscription)

    def _drop(self, subscription: Subscription) -> None:
        if self._subscriptions.pop(subscription.id, None) is None:
            return
        owner = subscription.owner
        owned = self._owned[owner]
        del owned[subscription.id]
        self._kept_rows[owner] -= subscription.kept
        if not owned:
            del self._owned[owner], self._kept_rows[owner]

    def _count(self, subscription: Subscription, change: int | None = None) -> None:
        """Count the rows the subscription's versions keep against its owner: again, or
        by `change` (what its latest versions kept and dropped changed it by)."""
        if change is None:
            rows = sum(len(version.rows) for version in subscription.versions.values())
        else:
            rows = subscription.kept + change
        if subscription.id in self._subscriptions:
            owner = subscription.owner
            self._kept_rows[owner] = self._kept_rows.get(owner, 0) + rows - subscription.kept
        subscription.kept = rows

    def _make_room(self, owner: str | None, keep: Subscription) -> None:
        """The owner's subscriptions asked for longest ago go until it is within its bounds
        (never `keep`, the one being answered)."""
        owned = self._owned.get(owner)
        while owned and (len(owned) > self.per_user or self._kept_rows[owner] > self.rows_per_user):
            oldest = next((s for s in owned.values() if s is not keep), None)
            if oldest is None:
                return
            self._drop(oldest)

    def _keep_version(self, subscription: Subscription, kept: Version) -> None:
        """`kept` as `subscription`'s newest version, the oldest going past KEPT_VERSIONS and
        its owner's rows counted (the caller holds the subscription's lock). A Version is
        never changed once made: subscriptions that reach one number with one answer may
        keep the same object."""
        versions = subscription.versions
        versions[kept.version] = kept
        subscription.newest = kept
        grown = len(kept.answer.rows)
        if len(versions) > KEPT_VERSIONS:  # one in, so one out (never more)
            grown -= len(versions.popitem(last=False)[1].answer.rows)
        if grown:
            self._kept_changed(subscription, grown)

    def _kept_changed(self, subscription: Subscription, grown: int) -> None:
        """The rows `subscription`'s versions keep grew by `grown` (else its owner is within
        its bounds as before: the manager's lock is not taken, as at most commits of a
        steady query)."""
        with self._lock:
            self._count(subscription, grown)
            self._make_room(subscription.owner, subscription)
