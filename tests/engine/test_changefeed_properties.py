"""Properties of the changefeed options over a real engine (spec: changefeeds).

- `initial=true`: the copied rows plus the changes given after them rebuild exactly the
  table (or the filtered rows) at each position, whatever the page sizes, with writes
  between the pages, and across a restart of the engine;
- squashed and unsquashed reading of the same log end in the same rows;
- a filtered feed of a table with before-images holds exactly the matching rows at every
  position.
"""

from __future__ import annotations

import tempfile
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features.change_stream import Change, read_runs
from refimpl.engine.features.feed_options import FeedFilter, FeedOptions, shape_changes
from refimpl.engine.features.initial_copy import CopyPosition, parse_position, read_initial
from refimpl.engine.storage import records
from refimpl.errors import BadRequest
from tests.engine.table_writes import Op, ops, run_op, table_rows

WIDTH = 2  # id, v


def _key_of(change: Change) -> int:
    assert change.key is not None
    return msgspec.msgpack.decode(bytes.fromhex(change.key))[1][0]


def _apply(state: dict[int, tuple], change: Change) -> None:
    op = change.op
    if op in ("upsert", "initial"):
        row = tuple(change.row)
        assert len(row) == WIDTH
        state[row[0]] = row
    elif op == "delete":
        state.pop(_key_of(change), None)


def _open(folder: str, full: bool, create: bool) -> refimpl.Connection:
    conn = refimpl.connect(folder)
    if create:
        mode = " REPLICA IDENTITY FULL" if full else ""
        conn.execute(f"CREATE TABLE t (id INT PRIMARY KEY, v INT){mode}")
    return conn


def _database(conn: refimpl.Connection) -> Any:
    return conn.instance.database(conn.database)


def _schema(conn: refimpl.Connection) -> Any:
    return _database(conn).tables["t"].schema


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=ops,
    between=st.lists(ops, min_size=1, max_size=4),
    after=ops,
    page=st.integers(1, 6),
    full=st.booleans(),
    filtered=st.booleans(),
    restart=st.booleans(),
)
def test_initial_copy_rebuilds_the_table(
    before: list[Op],
    between: list[list[Op]],
    after: list[Op],
    page: int,
    full: bool,
    filtered: bool,
    restart: bool,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = _open(folder, full, True)
        for op in before:
            run_op(conn, op)
        where = "v > 8" if filtered else None
        sql_where = f"WHERE {where}" if where else ""
        feed_filter = FeedFilter.compile(_schema(conn), where) if where else None
        state: dict[int, tuple] = {}
        at: CopyPosition | None = None
        rounds = iter(between)
        while True:
            batch = read_initial(_database(conn), _schema(conn), at, page, feed_filter)
            for item in batch.items:
                _apply(state, item.change)
            if not batch.copying:
                assert isinstance(batch.position, int)
                end = batch.position
                break
            assert isinstance(batch.position, CopyPosition)
            at = batch.position
            for op in next(rounds, []):
                run_op(conn, op)
            if restart and at.lsn % 2 == 0:
                conn.close()
                conn = _open(folder, full, False)
        # The copy is over: the table at `end` is what the reader holds. Then the stream.
        for op in after:
            run_op(conn, op)
        if restart:
            conn.close()
            conn = _open(folder, full, False)
        schema = _schema(conn)
        tail = read_runs(_database(conn), "t", schema, end, None).change_batch()
        options = FeedOptions(where=where)
        for change in shape_changes(tail, schema, options, feed_filter).changes:
            _apply(state, change)
        expected = table_rows(conn, sql_where)
        if full or not filtered:
            assert state == expected
        else:
            # Without before-images a row that left the filter is not reported (spec): the
            # reader holds every matching row as it is, and perhaps rows that left.
            assert {k: state.get(k) for k in expected} == expected
        conn.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=ops, page=st.integers(1, 8), full=st.booleans())
def test_squashed_and_plain_reading_end_alike(writes: list[Op], page: int, full: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = _open(folder, full, True)
        for op in writes:
            run_op(conn, op)
        database, schema = _database(conn), _schema(conn)
        results = []
        for squash in (False, True):
            state: dict[int, tuple] = {}
            position = 0
            while True:
                batch = read_runs(database, "t", schema, position, page).change_batch()
                shaped = shape_changes(batch, schema, FeedOptions(squash=squash), None)
                assert len(shaped.changes) <= len(batch.changes)
                for change in shaped.changes:
                    _apply(state, change)
                if batch.next_lsn == position:
                    break
                position = batch.next_lsn
            results.append(state)
        assert results[0] == results[1] == table_rows(conn)
        conn.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=ops, bound=st.integers(0, 20))
def test_filtered_feed_with_before_images_is_exact(writes: list[Op], bound: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conn = _open(folder, True, True)
        database, schema = _database(conn), _schema(conn)
        feed_filter = FeedFilter.compile(schema, f"v >= {bound}")
        state: dict[int, tuple] = {}
        position = 0
        for op in writes:
            run_op(conn, op)
            batch = read_runs(database, "t", schema, position, None).change_batch()
            for change in shape_changes(batch, schema, FeedOptions(where="x"), feed_filter).changes:
                _apply(state, change)
            position = batch.next_lsn
            assert state == table_rows(conn, f"WHERE v >= {bound}")
        conn.close()


def test_copy_positions_read_back() -> None:
    position = CopyPosition(7, ((), ((False, 3), 3)))
    assert parse_position(position.event_id(), "from") == position
    assert parse_position("12", "from") == 12


def _crafted(place: Any) -> str:
    return "2:" + msgspec.msgpack.encode(place).hex()


@pytest.mark.parametrize(
    "text",
    [
        "2:05",  # a number, not a place
        _crafted({"a": 1, "b": 2}),  # a map of two
        _crafted([[], [["a"]]]),  # a list where a value or an (is NULL, value) pair goes
        _crafted([[], [[True, None, 1]]]),
        "2:" + (b"\x92\x90" + b"\x91" * 5000 + b"\x90").hex(),  # nested 5000 deep
        "2:zz",
    ],
)
def test_crafted_copy_positions_are_bad_requests(text: str) -> None:
    with pytest.raises(BadRequest, match="names no place in a copy"):
        parse_position(text, "from")


def test_copy_positions_of_other_shapes_or_types_are_bad_requests() -> None:
    """Places that decode but are not of the table (other value types, other lengths) are
    refused before they meet a row; the table's own positions, NULLs included, read on."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        conn.execute(
            "CREATE TABLE t (ts TIMESTAMP, s SYMBOL, x DOUBLE, id INT PRIMARY KEY)"
            " TIMESERIES(ts) PARTITION BY DAY, SYMBOL(s) SORT BY (x)"
        )
        conn.execute(
            "INSERT INTO t VALUES (0, 'a', NULL, 1), (0, NULL, 2.5, 2), (86400000000, 'b', 1, 3)"
        )
        schema, database = _schema(conn), _database(conn)
        DAY = "1970-01-01"  # noqa: N806 - a partition's key holds its day as text
        first = read_initial(database, schema, None, 1, None)
        assert isinstance(first.position, CopyPosition)
        bad_places = [
            ((), ((False, 1.0), 1)),  # no partition
            ((0, False, "a"), ((False, 1.0), 1)),  # a number where the day's text goes
            ((DAY, False, "a"), ((False, "x"), 1)),  # a text DOUBLE
            ((DAY, False, "a"), (None, 1)),  # a bare NULL where (is NULL, value) goes
            ((DAY, False, "a"), ((False, None), 1)),
            ((DAY, False, "a"), ((False, 1.0), "1")),  # a text key
            ((DAY, False, "a"), ((False, 1.0), 1, 2)),  # one value too many
        ]
        for place in bad_places:
            crafted = parse_position(_crafted(place), "from")
            assert isinstance(crafted, CopyPosition)
            with pytest.raises(BadRequest, match="names no place in a copy of 't'"):
                read_initial(database, schema, crafted, 1, None)
        rows = [change.row[3] for change in (i.change for i in first.items)]
        at: CopyPosition | None = parse_position(first.position.event_id(), "from")  # type: ignore[assignment]
        while at is not None:
            batch = read_initial(database, schema, at, 1, None)
            rows += [item.change.row[3] for item in batch.items]
            at = batch.position if isinstance(batch.position, CopyPosition) else None
        assert sorted(rows) == [1, 2, 3]
        conn.close()


values = st.one_of(st.none(), st.integers(-(2**40), 2**40), st.text(max_size=5))


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(st.tuples(values, values), min_size=1, max_size=4), with_old=st.booleans())
def test_records_keep_before_images_and_nothing_else(rows: list[tuple], with_old: bool) -> None:
    olds = [None if i % 2 else row for i, row in enumerate(rows)] if with_old else None
    keys = [((), (i,)) for i in range(len(rows))]
    entries = [
        records.Entry.upsert("t", ["a", "b"], rows, None, olds),
        records.Entry.delete("t", keys, (["a", "b"], rows) if with_old else None),
    ]
    decoded = records.decode(1, records.encode(0, entries)).entries
    assert [e.payload for e in decoded] == [
        (["a", "b"], [list(r) for r in rows], None),
        ([[[], [i]] for i in range(len(rows))],),
    ]
    if not with_old:
        assert decoded[0].before is None and decoded[1].before is None
        plain = records.encode(0, [records.Entry.upsert("t", ["a", "b"], rows, None)])
        assert plain == records.encode(0, entries[:1])
    else:
        first, second = decoded[0].before, decoded[1].before
        assert first is not None and second is not None
        assert first.rows == [None if r is None else list(r) for r in olds or []]
        assert second.rows == [list(r) for r in rows]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(st.tuples(ops, st.booleans()), min_size=1, max_size=5),
    bound=st.integers(0, 20),
    page=st.integers(1, 6),
)
def test_readers_across_replica_identity_switches(
    rounds: list[tuple[list[Op], bool]], bound: int, page: int
) -> None:
    """A table switched to REPLICA IDENTITY FULL and back between writes, read by a plain,
    a squashed and a filtered reader in pages across the switches: the plain and squashed
    ones end with the table; the filtered one holds every matching row as it is (and, past
    changes without before-images, perhaps rows that left: the spec's inexact case)."""
    with tempfile.TemporaryDirectory() as folder:
        conn = _open(folder, False, True)
        database = _database(conn)
        feed_filter = FeedFilter.compile(_schema(conn), f"v >= {bound}")
        readers = {
            "plain": FeedOptions(),
            "squash": FeedOptions(squash=True),
            "where": FeedOptions(where="x"),
        }
        states: dict[str, dict[int, tuple]] = {name: {} for name in readers}
        positions = dict.fromkeys(readers, 0)

        def read_all() -> None:
            for name, options in readers.items():
                while True:
                    schema = _schema(conn)  # the mode as it is now, as a reader's request sees
                    batch = read_runs(database, "t", schema, positions[name], page).change_batch()
                    shaped = shape_changes(
                        batch, schema, options, feed_filter if name == "where" else None
                    )
                    for change in shaped.changes:
                        _apply(states[name], change)
                    if batch.next_lsn == positions[name]:
                        break
                    positions[name] = batch.next_lsn

        for writes, full in rounds:
            for op in writes[: len(writes) // 2]:
                run_op(conn, op)
            read_all()
            conn.execute(f"ALTER TABLE t REPLICA IDENTITY {'FULL' if full else 'DEFAULT'}")
            for op in writes[len(writes) // 2 :]:
                run_op(conn, op)
            read_all()
            table = table_rows(conn)
            assert states["plain"] == states["squash"] == table
            matching = table_rows(conn, f"WHERE v >= {bound}")
            assert {k: states["where"].get(k) for k in matching} == matching
        conn.close()
