"""Properties of the event stream's changefeed options over a real engine (spec:
changefeeds, options of GET /stream/changes).

With `initial=true`, the initial rows plus the events after them rebuild exactly the table
(or the filtered rows, with before-images) whatever the part sizes, with writes between the
parts, and whatever the ids a reader reconnects from (inside the copy or past it), across a
reopen of the engine; squashed and plain streams end with the same rows.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features.event_cursor import EventCursor, parse_event_id
from refimpl.engine.features.feed_options import FeedOptions
from refimpl.engine.features.initial_copy import CopyPosition, parse_position
from refimpl.engine.features.recent_transactions import RecentTransactions
from refimpl.engine.features.stream_options import OptionCursor, StreamFeed
from tests.engine.table_writes import Op, ops, run_op, table_rows


def _cursor(conn: refimpl.Connection, options: FeedOptions, last_id: str | None) -> OptionCursor:
    """A stream's cursor as `EventStreams.open` makes it, resumed from `last_id`."""
    database = conn.instance.database(conn.database)
    copy_from = resume = None
    if last_id is not None and ":" in last_id:
        found = parse_position(last_id, "Last-Event-ID")
        assert isinstance(found, CopyPosition)
        copy_from = found
    elif last_id is not None:
        resume = parse_event_id(last_id, "from")
    feed = StreamFeed.check(database, ["t"], options, copy_from)
    recent = RecentTransactions(database, database.name)

    def plain(at: Any) -> EventCursor:
        return EventCursor(recent, lambda table: table == "t", 3600.0, time.time, at)

    return feed.cursor(database, resume, plain)


def _apply(state: dict[int, tuple], event: Any) -> None:
    data = msgspec.json.decode(event.data)
    if event.kind == "reset":
        state.clear()
    if event.kind != "change" or data["op"] == "schema":
        return
    if data["row"] is not None:
        state[data["row"]["id"]] = (data["row"]["id"], data["row"]["v"])
    elif data["key"] is not None:
        state.pop(msgspec.msgpack.decode(bytes.fromhex(data["key"]))[1][0], None)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=ops,
    between=st.lists(ops, min_size=1, max_size=5),
    budget=st.integers(1, 400),
    full=st.booleans(),
    filtered=st.booleans(),
    squash=st.booleans(),
    reconnects=st.lists(st.booleans(), min_size=5, max_size=5),
    reopen=st.booleans(),
)
def test_initial_stream_rebuilds_the_table(
    before: list[Op],
    between: list[list[Op]],
    budget: int,
    full: bool,
    filtered: bool,
    squash: bool,
    reconnects: list[bool],
    reopen: bool,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        mode = " REPLICA IDENTITY FULL" if full else ""
        conn.execute(f"CREATE TABLE t (id INT PRIMARY KEY, v INT){mode}")
        for op in before:
            run_op(conn, op)
        where = "v > 8" if filtered else None
        options = FeedOptions(initial=True, where=where, squash=squash)
        cursor = _cursor(conn, options, None)
        state: dict[int, tuple] = {}
        last_id: str | None = None
        rounds = [*between, [], [], [], [], [], []]
        for index, writes in enumerate(rounds):
            taken = cursor.take(budget)
            for event in taken.events:
                _apply(state, event)
                last_id = event.id or last_id
            for op in writes:
                run_op(conn, op)
            if reconnects[index % len(reconnects)] and last_id is not None:
                if reopen and index == 1:
                    conn.close()
                    conn = refimpl.connect(folder)
                cursor = _cursor(conn, options, last_id)
        while True:
            taken = cursor.take(budget)
            for event in taken.events:
                _apply(state, event)
            if not taken.more and not taken.events:
                break
        expected = table_rows(conn, "WHERE v > 8" if filtered else "")
        if full or not filtered:
            assert state == expected
        else:
            assert {k: state.get(k) for k in expected} == expected
        conn.close()
