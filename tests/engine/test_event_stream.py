"""The event stream's engine half: ids, the cursor, resume exactly once, limits, tickets.

A real instance in a temporary folder; the streams are read through `EventStreams` as the
HTTP layer reads them, without HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.access import ADMIN, Principal
from refimpl.engine.access.tickets import TicketBook
from refimpl.engine.event_streams import Credential, EventStreams, StreamOptions
from refimpl.engine.features.event_cursor import Position, parse_event_id, row_key
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import BadRequest, TooManyRequests, Unauthorized, Unavailable
from refimpl.sql import ast
from tests.hypothesis_settings import OVER_FIXTURE

# Not `checked`: its key is no token, so the streams' sweep (every SWEEP_SECONDS) would end a
# stream of it as one whose token was dropped, in whichever example runs past that.
ADMIN_CREDENTIAL = Credential("admin-key", ADMIN, checked=False)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    opened = Instance.open(tmp_path / "data", EngineOptions())
    session = opened.session("demo", ADMIN)
    session.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING); CREATE TABLE u (n INT)")
    session.close()
    try:
        yield opened
    finally:
        opened.close()


def run(instance: Instance, sql: str) -> None:
    session = instance.session("demo", ADMIN)
    try:
        session.execute(sql)
    finally:
        session.close()


@given(st.integers(0, 2**40), st.integers(0, 2**20))
def test_ids_read_back_as_the_position_they_name(lsn: int, skip: int) -> None:
    position = Position(lsn, skip)
    assert parse_event_id(position.event_id(), "from") == position


@pytest.mark.parametrize("text", ["", "x", "1.", ".1", "1.0", "0.1", "1.2.3", "-1", "٣", "9" * 30])
def test_bad_ids_are_a_clear_400(text: str) -> None:
    with pytest.raises(BadRequest, match="Last-Event-ID"):
        parse_event_id(text, "Last-Event-ID")


def test_keys_of_upserts_are_those_of_deletes() -> None:
    schema = TableSchema.from_create(
        ast.CreateTable(
            "p",
            (ast.ColumnDef("ts", "TIMESTAMP"), ast.ColumnDef("s", "SYMBOL")),
            timeseries="ts",
            partition_by="DAY",
            partition_symbol="s",
            dedup_key=("ts", "s"),
        )
    )
    day = 1_790_208_000_000_000  # 2026-09-24
    assert row_key(schema, (day, "x"), (day, "x")) == row_key(schema, (day, "x"), (day, "x"))
    assert row_key(schema, (day, None), (day, None)).startswith("92")


def take_all(streams: EventStreams, stream, budget: int = 1 << 20) -> list:
    events = []
    while True:
        taken = stream.take(budget)
        events += taken.events
        if not taken.more:
            return events


@settings(OVER_FIXTURE, max_examples=25)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("tu"), st.integers(0, 5)), min_size=1, max_size=4),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_resuming_from_any_id_given_out_misses_and_repeats_nothing(
    instance: Instance, transactions: list[list[tuple[str, int]]], data: st.DataObject
) -> None:
    streams = EventStreams(instance, StreamOptions(per_token=1000, per_user=1000))
    first = streams.open(ADMIN_CREDENTIAL, "demo", [], None, None)
    (ready,) = first.take(1024).events
    for statements in transactions:
        parts = []
        for table, n in statements:
            if table == "t":
                parts.append(f"DELETE FROM t WHERE id = {n}; INSERT INTO t VALUES ({n}, 'v')")
            else:
                parts.append(f"INSERT INTO u VALUES ({n})")
        run(instance, "BEGIN; " + "; ".join(parts) + "; COMMIT")
    everything = take_all(streams, first, budget=data.draw(st.integers(1, 400)))
    changes = [e for e in everything if e.kind == "change"]
    assert changes and [e.id for e in changes] == sorted(
        (e.id for e in changes), key=lambda i: tuple(int(x) for x in i.split("."))
    )
    # The instance outlives an example, so the number of changes may differ when hypothesis
    # replays one: a draw whose bounds depended on it would be a flaky strategy.
    cut = data.draw(st.integers(0, 1 << 16)) % len(changes)
    resumed = streams.open(
        ADMIN_CREDENTIAL, "demo", [], parse_event_id(changes[cut].id, "from"), changes[cut].id
    )
    again = [e for e in take_all(streams, resumed, data.draw(st.integers(1, 400)))]
    assert [e.id for e in again if e.kind == "change"] == [e.id for e in changes[cut + 1 :]]
    assert again[-1].kind == "ready"
    streams.close_stream(first)
    streams.close_stream(resumed)
    assert ready.kind == "ready"


def test_streams_at_one_position_with_one_view_share_what_they_take(instance: Instance) -> None:
    run(instance, "CREATE USER r; GRANT SELECT ON t TO r")
    streams = EventStreams(instance, StreamOptions(per_token=100, per_user=100))

    def opened(key: str, principal: Principal, tables: list[str]):
        return streams.open(Credential(key, principal, checked=False), "demo", tables, None, None)

    admins = [opened(f"admin-{n}", ADMIN, []) for n in range(5)]
    named = opened("named", ADMIN, ["t"])
    reader = opened("reader", Principal("r"), [])  # may read t, not u
    everyone = [*admins, named, reader]
    assert all([e.kind for e in s.take(1 << 20).events] == ["ready"] for s in everyone)
    for n in range(2):
        run(instance, f"BEGIN; INSERT INTO t VALUES ({n}, 'a'); INSERT INTO u VALUES ({n}); COMMIT")
        taken = [s.take(1 << 20) for s in everyone]
        # One read and one list of events for the five alike; the others their own.
        assert all(t is taken[0] for t in taken[:5]) and len(taken[0].events) == 2
        assert taken[5] is not taken[0] and taken[6] is not taken[5]
        assert [e.id for e in taken[5].events] == [e.id for e in taken[6].events]
        assert [e.data for e in taken[5].events] == [taken[0].events[0].data]
        assert all(s.cursor.position == admins[0].cursor.position for s in everyone)
    for stream in everyone:
        streams.close_stream(stream)


def test_limits_takeover_capacity_and_shutdown(instance: Instance) -> None:
    streams = EventStreams(instance, StreamOptions(per_token=2, per_user=3, capacity=4))
    a = streams.open(ADMIN_CREDENTIAL, "demo", [], None, None)
    b = streams.open(ADMIN_CREDENTIAL, "demo", [], None, None)
    a.take(100)
    b.take(100)
    with pytest.raises(TooManyRequests, match="streams_per_token"):
        streams.open(ADMIN_CREDENTIAL, "demo", [], None, None)
    last = a.last_id
    assert last is not None  # it took events
    takeover = streams.open(ADMIN_CREDENTIAL, "demo", [], parse_event_id(last, "from"), last)
    assert a.ended and "took it over" in a.ended and b.ended is None
    other = Credential("other-key", ADMIN)
    streams.open(other, "demo", [], None, None)
    with pytest.raises(TooManyRequests, match="streams_per_user"):
        streams.open(other, "demo", [], None, None)
    assert streams.open_count() == 3
    streams.close_stream(takeover)
    streams.close()
    with pytest.raises(Unavailable, match="shutting down"):
        streams.open(other, "demo", [], None, None)


def test_tickets_once_hashed_and_timed() -> None:
    now = [1000.0]
    book = TicketBook(60, clock=lambda: now[0])
    ticket, expires = book.issue("key", "Demo")
    assert expires == 1060 and len(ticket) > 40
    assert ticket not in repr(book._tickets)  # only its hash is kept
    assert book.redeem(ticket, "demo") == "key"
    with pytest.raises(Unauthorized, match="once"):
        book.redeem(ticket, "demo")
    late, _ = book.issue("key", "demo")
    now[0] += 61
    with pytest.raises(Unauthorized, match="expired"):
        book.redeem(late, "demo")
    elsewhere, _ = book.issue("key", "demo")
    with pytest.raises(Unauthorized, match="another database"):
        book.redeem(elsewhere, "other")


@settings(OVER_FIXTURE, max_examples=40)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("commit"), st.sampled_from(["t", "u", "tu"])),
            st.tuples(st.sampled_from(["join", "alone"]), st.integers(0, 2)),
            st.tuples(st.just("group"), st.just(0)),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 400),
)
def test_streams_in_groups_get_every_event_once_as_one_alone_does(
    instance: Instance, steps: list[tuple[str, str | int]], budget: int
) -> None:
    """Streams join their group, are taken for by it, take alone (leaving it) in any order:
    each gets what a stream that never joined gets, with the same ids, once, in order."""
    streams = EventStreams(instance, StreamOptions(per_token=1000, per_user=1000))
    alone = streams.open(ADMIN_CREDENTIAL, "demo", [], None, None)
    members = [streams.open(ADMIN_CREDENTIAL, "demo", [], None, None) for _ in range(3)]
    got: dict[int, list] = {id(s): list(s.take(budget).events) for s in [alone, *members]}
    commits = 0

    def group_takes(group) -> bool:
        taken, taken_for = group.take(budget)
        for member in taken_for:
            got[id(member)] += taken.events
        return taken.more

    for kind, arg in steps:
        if kind == "commit":
            commits += 1
            changes = {
                "t": f"DELETE FROM t WHERE id = {commits}; INSERT INTO t VALUES ({commits}, 'v')",
                "u": f"INSERT INTO u VALUES ({commits})",
            }
            run(instance, "BEGIN; " + "; ".join(changes[t] for t in str(arg)) + "; COMMIT")
        elif kind == "join":
            streams.join(members[int(arg)], lambda group: None)
        elif kind == "alone":
            got[id(members[int(arg)])] += members[int(arg)].take(budget).events
        else:
            for group in {id(m.group): m.group for m in members if m.group}.values():
                group_takes(group)
    for group in {id(m.group): m.group for m in members if m.group}.values():
        while group_takes(group):
            pass
    for stream in [alone, *members]:
        got[id(stream)] += take_all(streams, stream, budget)
    expected = [(e.id, e.kind, e.data) for e in got[id(alone)]]
    for member in members:
        assert [(e.id, e.kind, e.data) for e in got[id(member)]] == expected
        assert member.group is None and member.last_id == alone.last_id
    for stream in [alone, *members]:
        streams.close_stream(stream)
