"""A bulk load (`Database.load_rows`) leaves the same table, log and revisions as the same
rows inserted the ordinary way; it refuses (None, nothing changed) the loads it cannot do,
and a reopened database holds what it committed."""

from __future__ import annotations

import gc
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.storage import bulk, bulk_merge, records, values
from refimpl.engine.storage.ident_index import ShardedIndex
from refimpl.engine.storage.memory_limit import rows_bytes
from refimpl.errors import DuplicateKey
from tests.engine.storage.trade_rows import BASE, DAY, TRADES, TYPES, trades


def everything(session: Session, table: str = "trades") -> list[tuple]:
    return list(session.execute(f"SELECT * FROM {table}", ()).rows)


def test_a_load_matches_the_ordinary_insert_and_survives_a_reopen(tmp_path: Path) -> None:
    rows = trades(3000)
    other = Instance.open(tmp_path / "other")
    with closing(other.session()) as plain:
        plain.execute(TRADES, ())
        plain.execute(f"INSERT INTO trades VALUES ({BASE + 5}, 'S1', 1.5, 1)", ())
        plain.insert_rows("trades", ["time", "symbol", "price", "qty"], list(rows))
        expected = everything(plain)
    other.close()
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute(TRADES, ())
        session.execute(f"INSERT INTO trades VALUES ({BASE + 5}, 'S1', 1.5, 1)", ())
        database = session.database
        rev_before = database.revisions.table_n("trades")
        loaded = database.load_rows("trades", rows)
        assert loaded is not None
        count, lsn = loaded
        assert count == 3000 and lsn == database.applied_lsn
        database.wait_durable(lsn)
        assert everything(session) == expected  # the same rows, in the same order
        assert database.revisions.table_n("trades") > rev_before
        record = records.decode(lsn, next(p for at, p in database.log.read(lsn - 1)))
        assert [e.kind for e in record.entries] == ["u"]
        assert record.entries[0].payload[1] == [list(row) for row in rows]
        session.execute(f"INSERT INTO trades VALUES ({BASE + 6}, 'S1', 2.5, 2)", ())
        after = everything(session)
    instance.close()
    reopened = Instance.open(tmp_path / "data")
    with closing(reopened.session()) as session:
        assert everything(session) == after
    reopened.close()


@pytest.mark.parametrize("first, second", [(50, 4000), (4000, 50)])
def test_rows_merge_into_partitions_the_table_holds(
    tmp_path: Path, first: int, second: int
) -> None:
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute(TRADES, ())
        database = session.database
        assert database.load_rows("trades", trades(first, step=DAY // 3000)) is not None
        assert database.load_rows("trades", trades(second, 1, step=DAY // 3000)) is not None
        got = everything(session)
        assert len(got) == first + second
        table = database.tables["trades"]
        assert len(table) == first + second
        # every partition in order, every row where the index says it is
        assert list(table.scan()) == got
        for ident, row in table.scan_with_idents():
            assert table.get(ident) == row
    instance.close()


def test_a_keyed_load_refuses_a_key_held_or_given_twice(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute("CREATE TABLE k (id BIGINT PRIMARY KEY, v DOUBLE)", ())
        session.execute("INSERT INTO k VALUES (1, 1.0)", ())
        database = session.database
        lsn = database.applied_lsn
        held = values.TypedRows(("BIGINT", "DOUBLE"), [(5, 5.0), (1, 2.0)])
        assert database.load_rows("k", held) is None
        twice = values.TypedRows(("BIGINT", "DOUBLE"), [(7, 5.0), (7, 2.0)])
        assert database.load_rows("k", twice) is None
        assert database.applied_lsn == lsn and everything(session, "k") == [(1, 1.0)]
        with pytest.raises(DuplicateKey):  # the ordinary insert says what is wrong
            session.insert_rows("k", ["id", "v"], held)
        fresh = values.TypedRows(("BIGINT", "DOUBLE"), [(9, 9.0), (3, 3.0)])
        assert database.load_rows("k", fresh) == (2, lsn + 1)
        assert everything(session, "k") == [(1, 1.0), (3, 3.0), (9, 9.0)]
    instance.close()


@pytest.mark.parametrize(
    "setup, rows",
    [
        ("CREATE INDEX by_v ON t (v)", [(1, 1.0)]),
        ("ALTER TABLE t REPLICA IDENTITY FULL", [(1, 1.0)]),
        ("SELECT 1", [(None, 1.0)]),  # NULL in the key column
    ],
)
def test_loads_that_go_the_ordinary_way(tmp_path: Path, setup: str, rows: list[tuple]) -> None:
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)", ())
        session.execute(setup, ())
        database = session.database
        lsn = database.applied_lsn
        assert database.load_rows("t", values.TypedRows(("BIGINT", "DOUBLE"), rows)) is None
        assert database.applied_lsn == lsn and everything(session, "t") == []
    instance.close()


def test_rows_typed_for_other_columns_and_a_changed_table_are_refused(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute(TRADES, ())
        database = session.database
        wrong = values.TypedRows(
            ("TIMESTAMP", "SYMBOL", "DOUBLE", "DOUBLE"), [(BASE, "A", 1.0, 1.0)]
        )
        assert database.load_rows("trades", wrong) is None
        load = bulk.prepare(
            "trades", database.tables["trades"], trades(10), [(i,) for i in range(10)]
        )
        assert bulk.still_fits(load, database.tables)
        session.execute("ALTER TABLE trades ADD COLUMN note STRING", ())
        assert not bulk.still_fits(load, database.tables)  # a schema change made a new table
    instance.close()


@pytest.mark.parametrize("count", [0, 1, 15, 16, 70_000])
@pytest.mark.parametrize("with_rowids", [True, False])
def test_a_record_encoded_in_slices_is_the_one_encoded_whole(count: int, with_rowids: bool) -> None:
    rows = list(trades(count))
    rowids = list(range(5, 5 + count)) if with_rowids else None
    columns = ["time", "symbol", "price", "qty"]
    whole = records.encode_unstamped([records.Entry.upsert("trades", columns, rows, rowids)])
    sliced = bulk.encode_record("trades", columns, rows, rowids)
    assert sliced == whole
    decoded = records.decode(1, bytes(records.stamp(sliced, 42)))
    assert decoded.committed_at == 42
    assert decoded.entries[0].payload == (columns, [list(row) for row in rows], rowids)


@pytest.mark.parametrize("swapped", [None, 0, bulk.CHECK_ROWS - 1, 2 * bulk.CHECK_ROWS - 1])
def test_keys_checked_in_slices_are_sorted_when_any_seam_is_out_of_order(
    swapped: int | None,
) -> None:
    """The order check goes a slice at a time; a pair out of order anywhere, at a seam
    between slices too, is found and the keys sorted."""
    keys = [(i,) for i in range(3 * bulk.CHECK_ROWS + 5)]
    if swapped is not None:
        keys[swapped], keys[swapped + 1] = keys[swapped + 1], keys[swapped]
    rows = dict.fromkeys(keys, ("row",))
    assert bulk._sorted_keys(keys, rows) == sorted(keys)


def test_a_loads_growth_counts_every_row(tmp_path: Path) -> None:
    """Counted against the memory limit a slice at a time, as the rows would be at once."""
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            table = session.database.tables["trades"]
            typed = trades(3 * bulk.COUNT_ROWS + 7)
            idents = bulk.rowid_idents(1, len(typed))
            load = bulk.prepare("trades", table, typed, idents)
            assert load.growth == rows_bytes(list(typed), table.schema) > 0
    finally:
        instance.close()


def test_identities_made_in_slices(tmp_path: Path) -> None:
    assert bulk.rowid_idents(7, 3) == [(7,), (8,), (9,)]
    count = bulk.SLICE_ROWS * 2 + 3
    assert bulk.rowid_idents(1, count) == [(i,) for i in range(1, count + 1)]
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute("CREATE TABLE k (id BIGINT PRIMARY KEY, v DOUBLE)", ())
        session.execute("CREATE TABLE k2 (a BIGINT, b BIGINT, v DOUBLE, PRIMARY KEY (a, b))", ())
        tables = session.database.tables
        one = values.TypedRows(("BIGINT", "DOUBLE"), [(i, 1.0) for i in range(count)])
        assert bulk.keys_of(tables["k"], one) == [(i,) for i in range(count)]
        two = values.TypedRows(("BIGINT", "BIGINT", "DOUBLE"), [(i, -i, 1.0) for i in range(count)])
        assert bulk.keys_of(tables["k2"], two) == [(i, -i) for i in range(count)]
        assert bulk.not_null_ok(tables["k"], one)
        late_null = values.TypedRows(("BIGINT", "DOUBLE"), [*one, (None, 2.0)])
        assert not bulk.not_null_ok(tables["k"], late_null)  # in the last slice
    instance.close()


def test_a_large_prepared_load_leaves_no_young_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller pauses the collector while a load is prepared; a large load is frozen out
    of it before the collector is turned back on, which would otherwise go over every object
    the load made in its next young pass."""
    monkeypatch.setattr(bulk, "FREEZE_ROWS", 1000)
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            table = session.database.tables["trades"]
            gc.disable()
            try:
                small = bulk.prepare("trades", table, trades(999), bulk.rowid_idents(1, 999))
                assert _in_generation(small.index) == 0  # what it made is young yet
                large = bulk.prepare("trades", table, trades(1000), bulk.rowid_idents(1, 1000))
                # frozen: tracked, in no generation, and none young
                assert gc.is_tracked(large.index) and _in_generation(large.index) is None
                assert _in_generation(large.partitions) is None
            finally:
                gc.enable()
                gc.unfreeze()  # the test's process, not a server: give them back
            assert len(small) == 999 and len(large) == 1000
    finally:
        instance.close()


def test_the_collector_is_off_for_every_step_of_a_load_and_on_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the NOT NULL check to the install (the identities are new tuples too), no pass
    of the collector can stop the server; after the load, done or refused, it is on again."""
    seen: dict[str, bool] = {}  # each step: was the collector on when it ran

    def watched(module: object, name: str) -> None:
        step = getattr(module, name)

        def run(*args: object) -> object:
            seen[name] = seen.get(name, False) or gc.isenabled()
            return step(*args)

        monkeypatch.setattr(module, name, run)

    for name in ("not_null_ok", "rowid_idents", "keys_of", "prepare"):
        watched(bulk, name)
    watched(bulk_merge, "merge_in")
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)", ())
            database = session.database
            assert database.load_rows("trades", trades(3000)) is not None
            assert gc.isenabled()
            refused = values.TypedRows(("BIGINT", "DOUBLE"), [(1, 1.0), (1, 2.0)])  # a key twice
            assert database.load_rows("t", refused) is None
            assert gc.isenabled()
            assert seen == dict.fromkeys(
                ("not_null_ok", "rowid_idents", "prepare", "merge_in", "keys_of"), False
            )
    finally:
        instance.close()


def test_a_pause_nests_and_ends_on_an_error() -> None:
    """Only the outermost pause turns the collector back on, also when its work fails."""
    with pytest.raises(ValueError), bulk.collector_paused():
        with bulk.collector_paused():
            pass
        assert not gc.isenabled()  # the inner pause left it as it found it
        raise ValueError
    assert gc.isenabled()


def test_quick_switches_nest_end_on_an_error_and_leave_a_short_interval_alone() -> None:
    """While a load runs, the switch interval is `LOAD_SWITCH_SECONDS`; the outermost one
    sets the caller's back, also when its work fails, and a shorter one is left as it is."""
    server = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # as `refimpl serve` sets it
    try:
        with pytest.raises(ValueError), bulk.quick_switches():
            assert sys.getswitchinterval() == pytest.approx(bulk.LOAD_SWITCH_SECONDS)
            with bulk.quick_switches():
                pass
            # The inner one left it as it found it.
            assert sys.getswitchinterval() == pytest.approx(bulk.LOAD_SWITCH_SECONDS)
            raise ValueError
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        sys.setswitchinterval(0.0001)
        with bulk.quick_switches():
            assert sys.getswitchinterval() == pytest.approx(0.0001)
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(server)


def _in_generation(thing: object) -> int | None:
    """The collector's generation `thing` is in; None when in none (frozen, or untracked)."""
    for generation in range(3):
        if any(found is thing for found in gc.get_objects(generation)):
            return generation
    return None


def test_prepared_partitions_the_table_lacks_become_its_own(tmp_path: Path) -> None:
    """A load into new partitions is taken over as prepared (no step per row under the
    locks); one into a partition the table holds is merged with it into a new partition,
    made with no lock held, that replaces it (the held one unchanged)."""
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            session.execute(f"INSERT INTO trades VALUES ({BASE + 1}, 'S0', 1.0, -1)", ())
            table = session.database.tables["trades"]
            (held_part, held), *_ = table.partitions.items()
            rows = trades(700)  # 100 rows of each of S0 ... S6, all on the first day
            load = bulk.prepare("trades", table, rows, bulk.rowid_idents(table.next_rowid, 700))
            table.next_rowid += 700
            merge = bulk_merge.Merge(load)
            assert merge.build()
            merge.install()
            assert len(load.partitions) == 7 and held_part in load.partitions
            for part, (prepared, _rows) in load.partitions.items():
                assert (table.partitions[part] is prepared) == (part != held_part)
            assert len(held) == 1 and len(table.partitions[held_part]) == 101
            assert sorted(table.scan()) == sorted([*rows, (BASE + 1, "S0", 1.0, -1)])
            for ident, row in table.scan_with_idents():
                assert table.get(ident) == row
    finally:
        instance.close()


@pytest.mark.parametrize("symbols", [1, 7])
@pytest.mark.parametrize("reverse", [False, True])
def test_rows_in_any_order_load_as_the_ordinary_insert_puts_them(
    tmp_path: Path, symbols: int, reverse: bool
) -> None:
    """Rows read in time order are taken in that order; any other order is sorted."""
    rows = [(BASE + i * 1000, f"S{i % symbols}", i * 0.5, i) for i in range(bulk.SLICE_ROWS + 100)]
    if reverse:
        rows.reverse()
    typed = values.TypedRows(TYPES, rows)
    got = []
    for name, ordinary in (("plain", True), ("bulk", False)):
        instance = Instance.open(tmp_path / name)
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            if ordinary:
                session.insert_rows("trades", ["time", "symbol", "price", "qty"], typed)
            else:
                assert session.database.load_rows("trades", typed) is not None
            table = session.database.tables["trades"]
            got.append((list(table.scan()), list(table.scan_with_idents())))
        instance.close()
    assert got[0] == got[1]


def test_rows_placed_for_columns_that_moved_are_refused(tmp_path: Path) -> None:
    """Rows converted for the table as it was (`columns` named) do not load into a table
    whose columns have the same types in the same order but other names: a DROP and an
    ADD COLUMN between the conversion and the load would otherwise put values in the
    wrong columns."""
    instance = Instance.open(tmp_path / "data")
    with closing(instance.session()) as session:
        session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, a DOUBLE, b DOUBLE)", ())
        database = session.database
        rows = [(1, 1.0, 2.0)]
        placed = values.TypedRows(("BIGINT", "DOUBLE", "DOUBLE"), rows, ("id", "a", "b"))
        session.execute("ALTER TABLE t DROP COLUMN a", ())
        session.execute("ALTER TABLE t ADD COLUMN a DOUBLE", ())
        assert database.load_rows("t", placed) is None
        same = values.TypedRows(("BIGINT", "DOUBLE", "DOUBLE"), rows, ("ID", "B", "A"))
        assert database.load_rows("t", same) == (1, database.applied_lsn)
        assert everything(session, "t") == [(1, 1.0, 2.0)]
    instance.close()


@pytest.mark.parametrize("held", [False, True])
def test_a_load_in_order_into_one_partition_makes_no_dict_of_all_its_rows(
    tmp_path: Path, held: bool
) -> None:
    """Rows of one partition in order become blocks that each hold a dict of their own rows
    (`Blocks.from_rows`), not blocks borrowing one dict of them all, whose growth is one C
    call over all of them (a resize of up to 120 ms at a million rows, every other thread
    waiting); into a partition the table holds, they merge, given in key order."""
    count = bulk.SLICE_ROWS + 100
    rows = values.TypedRows(TYPES, ((BASE + i * 1000, "S0", i * 0.5, i) for i in range(count)))
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            kept = (BASE + 500, "S0", 1.0, -1) if held else (BASE + DAY, "S1", 1.0, -1)
            session.execute(f"INSERT INTO trades VALUES ({kept[0]}, '{kept[1]}', 1.0, -1)", ())
            table = session.database.tables["trades"]
            load = bulk.prepare("trades", table, rows, bulk.rowid_idents(table.next_rowid, count))
            table.next_rowid += count
            ((part, (prepared, borrowed)),) = load.partitions.items()
            assert borrowed is None
            blocks = prepared._blocks
            assert len({id(block.rows) for block in blocks}) == len(blocks)
            assert all(list(block.rows) == block.keys for block in blocks)
            assert [row for block in blocks for row in block.values()] == list(rows)
            merge = bulk_merge.Merge(load)
            assert merge.build()
            merge.install()
            assert (table.partitions[part] is prepared) is not held
            assert sorted(table.scan()) == sorted([*rows, kept])
            for ident, row in table.scan_with_idents():
                assert table.get(ident) == row
            # The table's writer writes into the loaded blocks as into any of its own.
            session.execute("DELETE FROM trades WHERE qty = 1", ())
            session.execute(f"INSERT INTO trades VALUES ({BASE + 1500}, 'S0', 2.0, 2)", ())
            assert len(table.partitions[part]) == count + held
    finally:
        instance.close()


def test_prepare_lets_go_of_its_lists_a_slice_at_a_time(tmp_path: Path) -> None:
    """`prepare` takes the identities over and empties them, and the lists it made, a slice
    at a time (`bulk.let_go`) rather than in one step over a million items at its return;
    the values its rows touch are gathered a slice at a time too, the same values."""
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            table = session.database.tables["trades"]
            rows = trades(bulk.SLICE_ROWS * 2 + 5)
            idents = bulk.rowid_idents(table.next_rowid, len(rows))
            given = list(idents)
            load = bulk.prepare("trades", table, rows, idents)
            assert idents == []
            assert sorted(load.index) == given  # the index holds what the list held
            assert load.touched.values == {row[1] for row in rows}
            items, few = list(range(bulk.SLICE_ROWS * 3 + 1)), [1]
            bulk.let_go(items, [], few)
            assert items == few == []
    finally:
        instance.close()


def test_a_load_lets_go_of_its_index_and_partitions_once_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Database.load_rows` empties its load's index a shard at a time and its partitions
    one by one (`PreparedLoad.let_go`), not in one step at its return; the table's index,
    which took some of those shards over as they are (shards the table had no entry in),
    still places every row."""
    monkeypatch.setattr(bulk, "SHARD_AT", 64)  # a sharded load index from 64 rows on
    made: list[bulk.PreparedLoad] = []
    prepare = bulk.prepare

    def kept(*args: Any) -> bulk.PreparedLoad:
        made.append(prepare(*args))
        return made[-1]

    monkeypatch.setattr(bulk, "prepare", kept)
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            for i in range(40):  # entries in some shards of the table's index, not all
                session.execute(f"INSERT INTO trades VALUES ({BASE + DAY + i}, 'S9', 1.0, 1)", ())
            database = session.database
            assert database.load_rows("trades", trades(3000)) is not None
            (load,) = made
            assert len(load) == 3000 and len(load.index) == 0 and not load.partitions
            table = database.tables["trades"]
            assert isinstance(table.index, ShardedIndex) and len(table.index) == 3040
            for ident, row in table.scan_with_idents():
                assert table.get(ident) == row
            assert len(everything(session)) == 3040
    finally:
        instance.close()


def test_a_load_merged_among_held_rows_lets_go_of_what_the_table_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load among the rows of partitions the table holds: once installed, its own blocks
    (merged into new ones) are emptied a block at a time (`Blocks.let_go`), as are the
    merge's copies of the held partitions; the table holds every row of both loads."""
    made: list[list[Any]] = []
    prepare = bulk.prepare

    def kept(*args: Any) -> bulk.PreparedLoad:
        load = prepare(*args)
        made.append([blocks for blocks, _rows in load.partitions.values()])
        return load

    monkeypatch.setattr(bulk, "prepare", kept)
    merges: list[bulk_merge.Merge] = []
    begin = bulk_merge.Merge.__init__

    def noted(self: bulk_merge.Merge, load: bulk.PreparedLoad) -> None:
        begin(self, load)
        merges.append(self)

    monkeypatch.setattr(bulk_merge.Merge, "__init__", noted)
    instance = Instance.open(tmp_path / "data")
    try:
        with closing(instance.session()) as session:
            session.execute(TRADES, ())
            database = session.database
            first, among = trades(3000), trades(3000, start=1, step=7_000_000)
            assert database.load_rows("trades", first) is not None
            assert database.load_rows("trades", among) is not None
            table = database.tables["trades"]
            held = set(map(id, table.partitions.values()))
            for blocks in made[1]:
                assert id(blocks) in held or len(blocks) == 0
            assert any(len(blocks) == 0 for blocks in made[1])  # some merged, not taken
            assert all(len(copy) == 0 for copy in merges[-1].held.values())
            assert sorted(everything(session)) == sorted([*first, *among])
            for ident, row in table.scan_with_idents():
                assert table.get(ident) == row
    finally:
        instance.close()
