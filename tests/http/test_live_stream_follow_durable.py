"""A live-query stream's next events made in a pass (subscribe_stream's `_LiveStream._events`:
the changes its client has not had yet, each asked for with the id before it) are made while
the commit's flush runs and wait with the rest of the pass (`PassReads.settle`); without a
pass, each waits for the flush before it is given. No event shows a commit that is not
durable (the engine's half: tests/engine/features/test_live_durable*.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from refimpl import Connection
from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.http.endpoints.subscribe_stream import _LiveStream
from tests.engine.features.candles import CANDLES, TRADES
from tests.engine.features.held_disk import (
    FIRST_TRADE,
    SOON,
    WHILE,
    HeldDisk,
    commit_held,
    connected,
    in_thread,
)


class _Standing:
    """A stream's token that stands."""

    def gone(self) -> str | None:
        return None


@pytest.fixture
def disk() -> HeldDisk:
    return HeldDisk()


@pytest.fixture
def conn(tmp_path, disk: HeldDisk) -> Iterator[Connection]:
    yield from connected(tmp_path, disk, TRADES, FIRST_TRADE)


def _behind(conn: Connection, disk: HeldDisk) -> tuple[_LiveStream, Reply, int]:
    """A stream whose client has its first answer, and a pass's answer after a commit whose
    flush is held: the stream, the first answer, the commit's LSN."""
    manager = conn.instance.subscriptions
    session = conn.session()
    stream = _LiveStream(
        manager,
        session,
        CANDLES,
        False,
        _Standing(),  # type: ignore[arg-type]  # a stand-in for the request's token
        30.0,
        300.0,
        contextlib.nullcontext,
    )
    first = manager.ask_now(session, CANDLES, None)
    stream.first(first)  # watches the subscription's next change
    lsn, _ = commit_held(conn, disk)
    wait = manager.follow(session, first)
    assert isinstance(wait, LiveWait)
    # Another request of the subscription takes the change (a pass's, not yet durable).
    assert isinstance(wait.attempt(True, None, PassReads()), Reply)
    return stream, first, lsn


def test_next_events_in_a_pass_are_made_before_the_flush_and_settled_after(conn, disk):
    stream, first, lsn = _behind(conn, disk)
    reads = PassReads()
    making, made = in_thread(lambda: stream._events(first, first, None, None, reads))
    making.join(SOON)
    assert not making.is_alive(), "the next events waited for the flush before they were made"
    events = made[0]
    assert isinstance(events, bytes) and b"1530" in events, events
    database = conn.instance.database("demo")
    assert reads.needs == {database: lsn}
    settling, settled = in_thread(reads.settle)
    settling.join(WHILE)
    assert settling.is_alive(), "settle returned before the commit was durable"
    disk.release()
    settling.join(SOON)
    assert settled == [{}] and database.log.durable_lsn >= lsn


def test_next_events_without_a_pass_wait_for_the_flush(conn, disk):
    stream, first, _ = _behind(conn, disk)
    making, made = in_thread(lambda: stream._events(first, first, None))
    making.join(WHILE)
    assert making.is_alive(), "an event was given before its commit was durable"
    disk.release()
    making.join(SOON)
    assert isinstance(made[0], bytes) and b"1530" in made[0]
