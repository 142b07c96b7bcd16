"""Revisions (spec: revisions): per table and per value of its rev column, moved by commits."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.tracking.revisions import MAX_VALUES
from refimpl.errors import Forbidden, SqlError, TypeMismatch, UnknownTable
from tests.hypothesis_settings import OVER_FIXTURE

CANDLES = (
    "CREATE TABLE candles (time TIMESTAMP, symbol SYMBOL, close DOUBLE) TIMESERIES(time)"
    " PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time)"
)
REV = re.compile(r"^[0-9a-f]{12}\.[0-9]+$")


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    yield connection
    connection.close()


def revs(conn, table, *values):
    """{value: revision} as GET /api/rev answers it."""
    return conn.instance.database(conn.database).revisions.value_revs(table, list(values))


def table_rev(conn, table):
    return conn.instance.database(conn.database).revisions.table_rev(table)


def snapshot(conn, table, values=("NABIL", "NEPSE", "NICA")):
    return table_rev(conn, table), revs(conn, table, *values)


def moved(before, after):
    """The values whose revision differs between two snapshots."""
    return {v for v in before[1] if before[1][v] != after[1][v]}


@pytest.fixture
def candles(conn):
    conn.execute(CANDLES)
    conn.execute(
        "INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1510),"
        " ('2026-09-24T10:00:00Z', 'NEPSE', 2750), ('2026-09-24T10:00:00Z', 'NICA', 900)"
    )
    return conn


# -- what moves a revision ---------------------------------------------------------------


def test_revision_text_and_stability(candles):
    before = snapshot(candles, "candles")
    assert REV.match(before[0])
    assert all(REV.match(r) for r in before[1].values())
    boot = candles.instance.database("demo").revisions.boot
    assert before[0].startswith(boot + ".")
    # Reads move nothing.
    candles.execute("SELECT * FROM candles WHERE symbol = 'NABIL'")
    candles.execute("SELECT count(*) FROM candles")
    assert snapshot(candles, "candles") == before
    # A value never written moves when it first appears; a table never written is <boot>.0.
    unseen = revs(candles, "candles", "NEW")["NEW"]
    candles.execute("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NEW', 1)")
    assert revs(candles, "candles", "NEW")["NEW"] != unseen
    assert table_rev(candles, "no_such_table") == f"{boot}.0"


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("INSERT INTO candles VALUES ('2026-09-24T10:01:00Z', 'NABIL', 1511)", {"NABIL"}),
        ("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1)", {"NABIL"}),  # dedup
        ("UPDATE candles SET close = 1 WHERE symbol = 'NEPSE'", {"NEPSE"}),
        ("UPDATE candles SET symbol = 'NICA' WHERE symbol = 'NABIL'", {"NABIL", "NICA"}),
        ("DELETE FROM candles WHERE symbol = 'NICA'", {"NICA"}),
        ("DELETE FROM candles WHERE close > 1000", {"NABIL", "NEPSE"}),
        ("DELETE FROM candles WHERE symbol = 'NOPE'", set()),
        ("UPDATE candles SET close = 2 WHERE symbol = 'NOPE'", set()),
    ],
)
def test_a_write_moves_exactly_the_values_it_changed(candles, statement, expected):
    before = snapshot(candles, "candles")
    candles.execute(statement)
    after = snapshot(candles, "candles")
    assert moved(before, after) == expected
    assert (after[0] != before[0]) == bool(expected)


def test_update_moves_old_and_new_value_of_a_rowid_table(conn):
    conn.execute(
        "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
        " PARTITION BY DAY, SYMBOL(symbol)"
    )
    conn.execute(
        "INSERT INTO trades VALUES ('2026-01-01T00:00:00Z', 'NABIL', 1),"
        " ('2026-01-01T00:00:00Z', 'NICA', 2)"
    )
    before = snapshot(conn, "trades")
    conn.execute("UPDATE trades SET symbol = 'NEPSE' WHERE symbol = 'NABIL'")
    after = snapshot(conn, "trades")
    assert moved(before, after) == {"NABIL", "NEPSE"}
    conn.execute("DELETE FROM trades WHERE price = 1")
    assert moved(after, snapshot(conn, "trades")) == {"NEPSE"}


def test_insert_rows_moves_its_values(candles):
    before = snapshot(candles, "candles")
    session = candles.session()
    session.insert_rows(
        "candles", ["time", "symbol", "close"], [("2026-09-25T10:00:00Z", "NEPSE", 1.0)]
    )
    assert moved(before, snapshot(candles, "candles")) == {"NEPSE"}


def test_revisions_move_at_commit_not_inside_the_transaction(candles):
    writer = candles.session()
    reader = candles.session()

    def seen():
        row = reader.execute(
            "SELECT kdb_rev('candles'), kdb_rev('candles', 'NABIL'), kdb_rev('candles', 'NEPSE')"
        ).rows[0]
        assert row == (
            table_rev(candles, "candles"),
            *revs(candles, "candles", "NABIL", "NEPSE").values(),
        )
        return row

    before = seen()
    writer.execute("BEGIN")
    writer.execute("INSERT INTO candles VALUES ('2026-09-25T10:00:00Z', 'NABIL', 1)")
    writer.execute("UPDATE candles SET close = 5 WHERE symbol = 'NABIL'")
    assert seen() == before
    # The writer sees its own rows; the revisions still do not move.
    assert len(writer.execute("SELECT * FROM candles WHERE symbol = 'NABIL'").rows) == 2
    assert seen() == before
    writer.execute("COMMIT")
    after = seen()
    assert after[0] != before[0] and after[1] != before[1]
    assert after[2] == before[2]  # NEPSE untouched


def test_rollback_leaves_the_rows_and_a_read_agrees(candles):
    writer = candles.session()
    rows = candles.execute("SELECT * FROM candles ORDER BY symbol").rows
    before = snapshot(candles, "candles")
    writer.execute("BEGIN")
    writer.execute("DELETE FROM candles")
    assert snapshot(candles, "candles") == before
    writer.execute("ROLLBACK")
    # A rollback may move a revision, but the rows are those of before.
    assert candles.execute("SELECT * FROM candles ORDER BY symbol").rows == rows


def test_a_transaction_over_two_tables_moves_both(candles):
    candles.execute("CREATE TABLE plain (id INT PRIMARY KEY, v INT)")
    before = snapshot(candles, "candles"), table_rev(candles, "plain")
    session = candles.session()
    session.execute("BEGIN")
    session.execute("INSERT INTO plain VALUES (1, 1)")
    session.execute("INSERT INTO candles VALUES ('2026-09-25T10:00:00Z', 'NICA', 1)")
    session.execute("COMMIT")
    after = snapshot(candles, "candles"), table_rev(candles, "plain")
    assert moved(before[0], after[0]) == {"NICA"}
    assert after[1] != before[1]


@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE candles",
        "TRUNCATE TABLE candles",
        "ALTER TABLE candles DROP PARTITION LIST '2026'",
        "ALTER TABLE candles DROP PARTITION WHERE time < '2027-01-01'",
        "ALTER TABLE candles ADD COLUMN volume DOUBLE",
        "ALTER TABLE candles DROP COLUMN close",
    ],
)
def test_schema_changes_and_partition_drops_move_every_value(candles, statement):
    before = snapshot(candles, "candles", ("NABIL", "NEPSE", "NICA", "NEVER_WRITTEN"))
    candles.execute(statement)
    after = snapshot(candles, "candles", ("NABIL", "NEPSE", "NICA", "NEVER_WRITTEN"))
    assert moved(before, after) == {"NABIL", "NEPSE", "NICA", "NEVER_WRITTEN"}
    assert after[0] != before[0]


def test_delete_of_a_whole_period_moves_only_its_values(candles):
    candles.execute("INSERT INTO candles VALUES ('2025-09-24T10:00:00Z', 'NABIL', 1)")
    before = snapshot(candles, "candles")
    result = candles.execute("DELETE FROM candles WHERE symbol = 'NABIL' AND time < '2026-01-01'")
    assert result.count == 1
    assert moved(before, snapshot(candles, "candles")) == {"NABIL"}


def test_drop_and_create_again_gives_new_revisions(candles):
    before = snapshot(candles, "candles")
    candles.execute("DROP TABLE candles")
    candles.execute(CANDLES)
    after = snapshot(candles, "candles")
    assert moved(before, after) == {"NABIL", "NEPSE", "NICA"}
    assert after[0] != before[0]


# -- which column has revisions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("create", "table", "rev"),
    [
        (CANDLES, "candles", "symbol"),
        # SYMBOL(col) of PARTITION BY wins over a SYMBOL key column.
        (
            "CREATE TABLE t (a SYMBOL, b SYMBOL, v INT) PARTITION BY NONE, SYMBOL(b) DEDUP KEY (a)",
            "t",
            "b",
        ),
        (
            "CREATE TABLE t (time TIMESTAMP, a STRING, b SYMBOL) TIMESERIES(time)"
            " PARTITION BY DAY, SYMBOL(a) DEDUP KEY (b, time)",
            "t",
            "a",
        ),
        ("CREATE TABLE t (id SYMBOL PRIMARY KEY, v INT)", "t", "id"),
        ("CREATE TABLE t (k INT, s SYMBOL, v INT) DEDUP KEY (k, s)", "t", "s"),
        ("CREATE TABLE t (a SYMBOL, b SYMBOL, v INT) DEDUP KEY (a, b)", "t", "a"),
        ("CREATE TABLE t (id INT PRIMARY KEY, s SYMBOL)", "t", None),
        ("CREATE TABLE t (k STRING PRIMARY KEY, s SYMBOL)", "t", None),
        ("CREATE TABLE t (s SYMBOL, v INT)", "t", None),
    ],
)
def test_rev_column_choice_and_show_columns(conn, create, table, rev):
    conn.execute(create)
    result = conn.execute(f"SHOW COLUMNS FROM {table}")
    assert [c.name for c in result.columns][-1] == "rev"
    flagged = [row[0] for row in result.rows if row[-1]]
    assert flagged == ([] if rev is None else [rev])
    schema = conn.instance.database("demo").tables[table].schema
    assert schema.rev_column == rev


def test_writes_move_only_the_rev_column_value(conn):
    conn.execute("CREATE TABLE t (a SYMBOL, b SYMBOL, v INT) DEDUP KEY (a, b)")
    conn.execute("INSERT INTO t VALUES ('x', 'y', 1), ('y', 'x', 2)")
    before = snapshot(conn, "t", ("x", "y"))
    conn.execute("UPDATE t SET v = 3 WHERE a = 'x'")
    assert moved(before, snapshot(conn, "t", ("x", "y"))) == {"x"}


@pytest.mark.parametrize(
    "create",
    ["CREATE TABLE t (id INT PRIMARY KEY, s SYMBOL)", "CREATE TABLE t (id INT, s SYMBOL)"],
)
def test_a_table_without_rev_column_moves_every_value_on_each_write(conn, create):
    conn.execute(create)
    values = ("a", "b", "anything")
    for statement in [
        "INSERT INTO t VALUES (1, 'a')",
        "UPDATE t SET s = 'b' WHERE id = 1",
        "DELETE FROM t WHERE id = 1",
    ]:
        before = snapshot(conn, "t", values)
        conn.execute(statement)
        after = snapshot(conn, "t", values)
        assert moved(before, after) == set(values)
        assert set(after[1].values()) == {after[0]}  # every value's revision is the table's
    assert conn.instance.stats()["databases"]["demo"]["rev_values"] == 0


def test_more_than_max_values_drops_the_list(conn):
    conn.execute("CREATE TABLE ids (id SYMBOL PRIMARY KEY, v INT)")
    conn.execute(CANDLES)
    conn.execute("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1)")

    def kept():
        return conn.instance.stats()["databases"]["demo"]["rev_values"]

    session = conn.session()
    session.insert_rows("ids", ["id", "v"], [(f"c{i}", i) for i in range(MAX_VALUES)])
    assert kept() == MAX_VALUES + 1  # exactly the limit is still kept (plus NABIL)
    before = snapshot(conn, "ids", ("c1", "c2", "other"))
    conn.execute("UPDATE ids SET v = 0 WHERE id = 'c1'")
    assert moved(before, snapshot(conn, "ids", ("c1", "c2", "other"))) == {"c1"}

    conn.execute("INSERT INTO ids VALUES ('one_too_many', 0)")
    assert kept() == 1  # only NABIL of candles is left
    for statement in ["UPDATE ids SET v = 1 WHERE id = 'c1'", "DELETE FROM ids WHERE id = 'c2'"]:
        before = snapshot(conn, "ids", ("c1", "c2", "other"))
        conn.execute(statement)
        after = snapshot(conn, "ids", ("c1", "c2", "other"))
        assert moved(before, after) == {"c1", "c2", "other"}
        assert kept() == 1
    # Another table keeps its own list.
    before = snapshot(conn, "candles")
    conn.execute("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NEPSE', 1)")
    assert moved(before, snapshot(conn, "candles")) == {"NEPSE"}


# -- kdb_rev() ---------------------------------------------------------------------------


def test_kdb_rev_matches_the_route_and_is_never_cached(candles):
    def ask():
        return candles.execute(
            "SELECT kdb_rev('candles'), kdb_rev('candles', 'NABIL'), kdb_rev('CANDLES', 'NICA'),"
            " kdb_rev('candles', symbol) FROM candles WHERE symbol = 'NEPSE'"
        ).rows

    first = ask()
    expected = revs(candles, "candles", "NABIL", "NICA", "NEPSE")
    assert first == [
        (table_rev(candles, "candles"), expected["NABIL"], expected["NICA"], expected["NEPSE"])
    ]
    candles.execute("INSERT INTO candles VALUES ('2026-09-25T10:00:00Z', 'NABIL', 1)")
    second = ask()
    assert second[0][0] != first[0][0] and second[0][1] != first[0][1]
    assert second[0][2:] == first[0][2:]
    example = candles.execute(
        "SELECT length(kdb_rev('candles', 'NABIL')) > 0 AS has_rev,"
        " kdb_rev('candles', 'NABIL') = kdb_rev('candles', 'NABIL') AS stable"
    )
    assert example.rows == [(True, True)]


def test_kdb_rev_null_arguments_give_null(candles):
    assert candles.execute(
        "SELECT kdb_rev(NULL), kdb_rev(NULL, 'NABIL'), kdb_rev('candles', NULL),"
        " kdb_rev(NULL, NULL)"
    ).rows == [(None, None, None, None)]


def test_kdb_rev_errors(candles):
    with pytest.raises(UnknownTable, match="nope"):
        candles.execute("SELECT kdb_rev('nope')")
    with pytest.raises(UnknownTable):
        candles.execute("SELECT kdb_rev('nope', 'NABIL')")
    with pytest.raises(TypeMismatch):
        candles.execute("SELECT kdb_rev(1)")
    with pytest.raises(SqlError):
        candles.execute("SELECT kdb_rev()")
    with pytest.raises(SqlError):
        candles.execute("SELECT kdb_rev('candles', 'a', 'b')")


def test_kdb_rev_needs_read_rights(candles):
    candles.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    for statement in [
        "CREATE USER bob",
        "CREATE USER carol",
        "GRANT READ ON DATABASE demo TO bob",
        "GRANT SELECT ON other TO carol",
    ]:
        candles.execute(statement)
    bob = candles.instance.session("demo", Principal("bob"))
    carol = candles.instance.session("demo", Principal("carol"))
    query = "SELECT kdb_rev('candles'), kdb_rev('candles', 'NABIL')"
    assert bob.execute(query).rows == [
        (table_rev(candles, "candles"), revs(candles, "candles", "NABIL")["NABIL"])
    ]
    assert carol.execute("SELECT kdb_rev('other')").rows[0][0] == table_rev(candles, "other")
    with pytest.raises(Forbidden):
        carol.execute(query)
    candles.execute("REVOKE SELECT ON candles FROM bob")
    with pytest.raises(Forbidden):
        bob.execute("SELECT kdb_rev('candles')")
    with pytest.raises(Forbidden):
        bob.execute("SELECT kdb_rev('candles', 'NABIL')")
    # A NULL table name checks nothing and gives NULL.
    assert bob.execute("SELECT kdb_rev(NULL)").rows == [(None,)]
    candles.execute("GRANT SELECT ON candles TO bob")
    assert bob.execute("SELECT kdb_rev('candles')").rows[0][0] == table_rev(candles, "candles")


# -- restarts ----------------------------------------------------------------------------


def test_a_restart_changes_every_revision(tmp_path):
    path = tmp_path / "data"
    first = refimpl.connect(path)
    first.execute(CANDLES)
    first.execute("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1)")
    before = snapshot(first, "candles")
    boot = first.instance.database("demo").revisions.boot
    first.close()
    second = refimpl.connect(path)
    try:
        after = snapshot(second, "candles")
        new_boot = second.instance.database("demo").revisions.boot
        assert new_boot != boot
        assert after[0].split(".")[0] == new_boot
        assert all(after[1][v] != before[1][v] for v in before[1])
        assert all(r.startswith(new_boot + ".") for r in after[1].values())
        # Recovery replays the log: the rows are back, and the revisions move from here on.
        assert second.execute("SELECT count(*) FROM candles").rows == [(1,)]
        second.execute("INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NEPSE', 1)")
        assert moved(after, snapshot(second, "candles")) == {"NEPSE"}
    finally:
        second.close()


# -- a model: a commit moves exactly the values of the rows it changed ------------------

SYMBOLS = ["A", "B", "C", "D"]
OPS = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 5), st.sampled_from(SYMBOLS), st.integers(0, 3)),
    st.tuples(st.just("set_v"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("move"), st.integers(0, 5), st.sampled_from(SYMBOLS)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("delete_sym"), st.sampled_from(SYMBOLS)),
)


@settings(OVER_FIXTURE, max_examples=25)
@given(transactions=st.lists(st.lists(OPS, min_size=1, max_size=3), min_size=1, max_size=8))
def test_model_a_commit_moves_exactly_the_touched_values(tmp_path_factory, transactions):
    connection = refimpl.connect(tmp_path_factory.mktemp("model") / "data")
    try:
        connection.execute(
            "CREATE TABLE m (id INT, sym SYMBOL, v INT) PARTITION BY NONE, SYMBOL(sym)"
            " DEDUP KEY (id)"
        )
        model: dict[int, tuple[str, int]] = {}
        session = connection.session()
        for ops in transactions:
            before_rows = dict(model)
            touched: set[str] = set()  # values of rows a statement matched, before or after
            before = snapshot(connection, "m", SYMBOLS)
            session.execute("BEGIN")
            for op in ops:
                kind = op[0]
                if kind == "insert":
                    _, ident, sym, v = op
                    session.execute("INSERT INTO m VALUES (?, ?, ?)", (ident, sym, v))
                    if ident in model:
                        touched.add(model[ident][0])
                    model[ident] = (sym, v)
                    touched.add(sym)
                elif kind == "set_v":
                    _, ident, v = op
                    session.execute("UPDATE m SET v = ? WHERE id = ?", (v, ident))
                    if ident in model:
                        touched.add(model[ident][0])
                        model[ident] = (model[ident][0], v)
                elif kind == "move":
                    _, ident, sym = op
                    session.execute("UPDATE m SET sym = ? WHERE id = ?", (sym, ident))
                    if ident in model:
                        touched |= {model[ident][0], sym}
                        model[ident] = (sym, model[ident][1])
                elif kind == "delete":
                    session.execute("DELETE FROM m WHERE id = ?", (op[1],))
                    if op[1] in model:
                        touched.add(model.pop(op[1])[0])
                else:
                    session.execute("DELETE FROM m WHERE sym = ?", (op[1],))
                    for ident in [i for i, (s, _) in model.items() if s == op[1]]:
                        touched.add(model.pop(ident)[0])
            assert snapshot(connection, "m", SYMBOLS) == before  # not before COMMIT
            session.execute("COMMIT")
            after = snapshot(connection, "m", SYMBOLS)
            changed = {
                s
                for s in SYMBOLS
                if sorted(r for r in before_rows.values() if r[0] == s)
                != sorted(r for r in model.values() if r[0] == s)
            }
            assert changed <= moved(before, after) <= touched
            assert sorted(connection.execute("SELECT sym, v FROM m").rows) == sorted(model.values())
    finally:
        connection.close()
