"""A time-bucketed live query's new answer from re-running only the buckets a commit
changed (spec: subscribe), for `live_queries.SubscriptionManager`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.engine.features import buckets
from refimpl.engine.features.live_answers import Identity, Subscription

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.tracking.shared_results import SharedResults


def changed_buckets_rows(
    shared: SharedResults,
    session: StatementContext,
    subscription: Subscription,
    applied: int,
    max_rows: int,
) -> dict[Identity, tuple] | None:
    """The new answer from re-running only the changed buckets, or None (run in full: no
    bucket plan, no answer yet, the table dropped or keyed without the time, or more than
    `max_rows` rows). Every subscriber of the query at the state `applied` reads the log and
    runs the narrowed query once (`shared`); each one's right was checked before. The log's
    records up to `applied` are read from memory while the log keeps them there, maybe
    before they are durable: the caller shows the answer only once they are
    (`live_pass.shown_durable`)."""
    plan = subscription.buckets
    if plan is None or subscription.position is None or not subscription.versions:
        return None
    database = subscription.database
    table = database.tables.get(subscription.table)
    if table is None:
        return None  # dropped: the full run says so
    if plan.key_time_index is None and table.keyed:
        # Without the time in the key, an UPDATE of a row's time is logged as an upsert
        # of its new time only: the bucket it left would keep the row. Run in full.
        return None
    schema = table.schema
    floor = None if table.keyed else subscription.rowid_floor
    position = subscription.position
    # Subscribers woken by one commit mostly ask the same: read the log and run the
    # narrowed query once for all of them (keyed by the state they were read at).
    changed = shared.get(
        ("buckets", database, subscription.table, plan, position, applied, floor),
        lambda: buckets.changed_buckets(
            database, subscription.table, schema, plan, position, floor, applied
        ),
    )
    if changed is None:
        return None
    previous = subscription.current.rows
    if not changed:
        return dict(previous)
    output = shared.get(
        ("rows", database, subscription.select, frozenset(changed), applied),
        lambda: buckets.run_buckets(session, subscription.select, plan, changed),
    )
    rows = buckets.merged(previous, plan, changed, output.rows, subscription.identity)
    if len(rows) > max_rows:
        return None
    return rows
