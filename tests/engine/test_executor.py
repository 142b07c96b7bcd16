"""Statements through the embedded API: results, messages, rules and errors."""

from __future__ import annotations

import pytest

import refimpl
from refimpl.errors import (
    DuplicateKey,
    ParameterError,
    SqlError,
    TransactionError,
    TypeMismatch,
    UnknownColumn,
    UnknownTable,
)


@pytest.fixture
def db(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    yield connection
    connection.close()


def rows(db, sql, params=()):
    return db.execute(sql, params).rows


def test_reference_acct_example(db):
    assert (
        db.execute("CREATE TABLE acct (id INT PRIMARY KEY, name STRING, bal DOUBLE)").message
        == "table 'acct' created"
    )
    result = db.execute("INSERT INTO acct VALUES (1, 'Asha', 10), (2, 'Bikash', 20)")
    assert (result.message, result.count) == ("2 row(s) inserted", 2)
    assert db.execute("UPDATE acct SET bal = 15 WHERE id = 1").message == "1 row(s) updated"
    assert db.execute("DELETE FROM acct WHERE id = 2").message == "1 row(s) deleted"
    result = db.execute("SELECT * FROM acct")
    assert [(c.name, c.type) for c in result.columns] == [
        ("id", "INT"),
        ("name", "STRING"),
        ("bal", "DOUBLE"),
    ]
    assert result.rows == [(1, "Asha", 15.0)]


def test_duplicate_primary_key_applies_nothing(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO t VALUES (1, 1)")
    with pytest.raises(DuplicateKey):
        db.execute("INSERT INTO t VALUES (2, 2), (1, 3)")
    assert rows(db, "SELECT id, v FROM t ORDER BY id") == [(1, 1)]


def test_dedup_key_upserts(db):
    db.execute(
        "CREATE TABLE c (time TIMESTAMP, symbol SYMBOL, close DOUBLE) TIMESERIES(time)"
        " PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time)"
    )
    db.execute("INSERT INTO c VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1510)")
    db.execute("INSERT INTO c VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1520)")
    assert rows(db, "SELECT close FROM c") == [(1520.0,)]


def test_update_moving_keys_is_a_set_operation(db, tmp_path):
    db.execute("CREATE TABLE k (id INT PRIMARY KEY, v STRING)")
    db.execute("INSERT INTO k VALUES (1, 'a'), (2, 'b')")
    db.execute("UPDATE k SET id = id + 1")
    assert rows(db, "SELECT id, v FROM k ORDER BY id") == [(2, "a"), (3, "b")]
    db.close()
    reopened = refimpl.connect(tmp_path / "data")
    try:
        assert rows(reopened, "SELECT id, v FROM k ORDER BY id") == [(2, "a"), (3, "b")]
    finally:
        reopened.close()


def test_update_onto_existing_key_fails(db):
    db.execute("CREATE TABLE k (id INT PRIMARY KEY, v STRING)")
    db.execute("INSERT INTO k VALUES (1, 'a'), (2, 'b')")
    with pytest.raises(DuplicateKey):
        db.execute("UPDATE k SET id = 2 WHERE id = 1")
    assert rows(db, "SELECT id FROM k ORDER BY id") == [(1,), (2,)]


def test_transactions(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    db.execute("BEGIN")
    db.execute("INSERT INTO t VALUES (1)")
    assert rows(db, "SELECT count(*) FROM t") == [(1,)]
    db.execute("ROLLBACK")
    assert rows(db, "SELECT count(*) FROM t") == [(0,)]
    result = db.execute("BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); COMMIT")
    assert result.statements == 4
    assert rows(db, "SELECT id FROM t ORDER BY id") == [(1,), (2,)]
    with pytest.raises(TransactionError):
        db.execute("COMMIT")


def test_error_in_script_rolls_back_and_names_statement(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(DuplicateKey) as caught:
        db.execute("BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (1); COMMIT")
    assert caught.value.statement_index == 3
    assert rows(db, "SELECT count(*) FROM t") == [(0,)]


def test_readers_do_not_see_open_transactions(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    other = db.session()
    other.execute("BEGIN")
    other.execute("INSERT INTO t VALUES (7)")
    assert rows(db, "SELECT count(*) FROM t") == [(0,)]
    other.execute("COMMIT")
    assert rows(db, "SELECT count(*) FROM t") == [(1,)]


def test_select_features(db):
    db.execute("CREATE TABLE p (id INT PRIMARY KEY, name STRING, score DOUBLE, team SYMBOL)")
    db.execute(
        "INSERT INTO p VALUES (1, 'ann', 10, 'red'), (2, 'bob', NULL, 'red'),"
        " (3, 'cy', 30, 'blue'), (4, 'di', 40, NULL)"
    )
    assert rows(db, "SELECT name FROM p WHERE score > 15 ORDER BY score DESC") == [("di",), ("cy",)]
    assert rows(db, "SELECT team, count(*), sum(score) FROM p GROUP BY team ORDER BY team") == [
        ("blue", 1, 30.0),
        ("red", 2, 10.0),
        (None, 1, 40.0),
    ]
    assert rows(db, "SELECT name FROM p ORDER BY score NULLS FIRST LIMIT 2") == [("bob",), ("ann",)]
    assert rows(db, "SELECT name FROM p ORDER BY id LIMIT 2 OFFSET 1") == [("bob",), ("cy",)]
    assert rows(db, "SELECT DISTINCT team FROM p WHERE team IS NOT NULL ORDER BY team") == [
        ("blue",),
        ("red",),
    ]
    assert rows(db, "SELECT count(DISTINCT team) FROM p") == [(2,)]
    assert rows(db, "SELECT name FROM p WHERE name LIKE 'b%' OR id IN (3)") == [("bob",), ("cy",)]
    assert rows(db, "SELECT upper(name) || '!' FROM p WHERE id BETWEEN 1 AND 1") == [("ANN!",)]
    assert rows(
        db, "SELECT CASE WHEN score IS NULL THEN 'none' ELSE 'some' END FROM p WHERE id = 2"
    ) == [("none",)]
    assert rows(db, "SELECT team, avg(score) FROM p GROUP BY team HAVING count(*) > 1") == [
        ("red", 10.0)
    ]
    assert rows(db, "SELECT 7 / 2, 7 % 3, 1 / 0, 7.0 / 2") == [(3, 1, None, 3.5)]
    assert rows(db, "SELECT coalesce(NULL, 2), abs(-3), round(2.5), length('abc')") == [
        (2, 3, 3.0, 3)
    ]


def test_between_compares_each_bound_with_its_own_affinity(db):
    # Found by the long fuzz run: a text operand read as a number next to one bound and as
    # text next to the other was compared raw, and the TypeError answered 500.
    assert rows(
        db,
        "SELECT CAST(-963 AS STRING) BETWEEN -963 AND CAST(-963 AS STRING),"
        " '5' NOT BETWEEN 1 AND '9', 0 BETWEEN 1 AND NULL",
    ) == [(True, False, False)]


def test_first_last_follow_time_order(db):
    db.execute(
        "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
        " PARTITION BY DAY SORT BY (symbol, time)"
    )
    db.execute(
        "INSERT INTO trades VALUES ('2026-09-24T10:00:30Z', 'B', 5),"
        " ('2026-09-24T10:00:10Z', 'A', 1), ('2026-09-24T10:00:50Z', 'A', 3),"
        " ('2026-09-24T10:01:10Z', 'A', 4)"
    )
    result = db.execute(
        "SELECT date_trunc('minute', time) AS m, first(price) AS open, last(price) AS close,"
        " max(price) AS high FROM trades GROUP BY m ORDER BY m"
    )
    assert [c.type for c in result.columns] == ["TIMESTAMP", "DOUBLE", "DOUBLE", "DOUBLE"]
    assert [r[1:] for r in result.rows] == [(1.0, 3.0, 5.0), (4.0, 4.0, 4.0)]


def test_timeseries_reads_in_partition_and_sort_order(db):
    db.execute("CREATE TABLE e (time TIMESTAMP, v INT) TIMESERIES(time) PARTITION BY MONTH")
    db.execute(
        "INSERT INTO e VALUES ('2026-03-01T00:00:00Z', 3), ('2026-01-05T00:00:00Z', 1),"
        " ('2026-01-02T00:00:00Z', 0), ('2026-02-01T00:00:00Z', 2)"
    )
    assert rows(db, "SELECT v FROM e") == [(0,), (1,), (2,), (3,)]
    assert rows(db, "SELECT v FROM e WHERE time >= '2026-02-01'") == [(2,), (3,)]


def test_delete_of_whole_partitions_and_drop_partition(db):
    db.execute("CREATE TABLE e (time TIMESTAMP, v INT) TIMESERIES(time) PARTITION BY YEAR")
    db.execute(
        "INSERT INTO e VALUES ('2025-03-01T00:00:00Z', 1), ('2026-01-05T00:00:00Z', 2),"
        " ('2027-01-05T00:00:00Z', 3)"
    )
    assert db.execute("DELETE FROM e WHERE time < '2026-01-01'").count == 1
    message = db.execute("ALTER TABLE e DROP PARTITION LIST '2027'").message
    assert message == "1 partition(s) dropped from table 'e'"
    assert rows(db, "SELECT v FROM e") == [(2,)]


def test_schema_changes_and_show(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    db.execute("ALTER TABLE t ADD COLUMN score DOUBLE")
    assert rows(db, "SELECT * FROM t") == [(1, "a", None)]
    db.execute("ALTER TABLE t DROP COLUMN name")
    assert rows(db, "SELECT * FROM t") == [(1, None)]
    assert rows(db, "SHOW TABLES") == [("t", "table")]
    assert rows(db, "SHOW COLUMNS FROM t") == [
        ("id", "INT", True, False, False),
        ("score", "DOUBLE", False, False, False),
    ]
    statement = rows(db, "SHOW CREATE TABLE t")[0][1]
    assert statement == "CREATE TABLE t (\n  id INT PRIMARY KEY,\n  score DOUBLE\n)"
    assert db.execute("TRUNCATE t").message == "table 't' truncated"
    assert db.execute("DROP TABLE t").message == "table 't' dropped"
    with pytest.raises(UnknownTable):
        db.execute("SELECT * FROM t")


def test_reserved_looking_names_are_plain_columns(db):
    db.execute(
        "CREATE TABLE w (key INT PRIMARY KEY, op STRING, seq INT, lsn INT, time TIMESTAMP,"
        " symbol SYMBOL, first DOUBLE, last DOUBLE, value DOUBLE)"
    )
    db.execute("INSERT INTO w VALUES (1, 'x', 2, 3, '2026-01-01T00:00:00Z', 'S', 1, 2, 3)")
    assert rows(db, "SELECT key, op, seq, lsn, symbol, first, last, value FROM w") == [
        (1, "x", 2, 3, "S", 1.0, 2.0, 3.0)
    ]


def test_parameters(db):
    db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, s STRING, at TIMESTAMP)")
    db.execute("INSERT INTO t VALUES (?, ?, ?)", (5, "it's", "2026-01-01T00:00:00Z"))
    assert rows(db, "SELECT s FROM t WHERE id = ?", (5,)) == [("it's",)]
    with pytest.raises(ParameterError):
        db.execute("SELECT s FROM t WHERE id = ?")


def test_errors_name_the_thing(db):
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    with pytest.raises(UnknownColumn, match="nope"):
        db.execute("SELECT nope FROM t")
    with pytest.raises(UnknownTable, match="missing"):
        db.execute("INSERT INTO missing VALUES (1)")
    with pytest.raises(TypeMismatch, match="'s'"):
        db.execute("INSERT INTO t VALUES (1, 2)")
    with pytest.raises(SqlError):
        db.execute("SELECT s, count(*) FROM t")


def test_recovery_rebuilds_state_with_and_without_checkpoint(tmp_path):
    path = tmp_path / "data"
    with refimpl.connect(path) as db:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        db.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
        db.execute("CHECKPOINT")
        db.execute("UPDATE t SET v = 20 WHERE id = 2")
        db.execute("CREATE TABLE n (v INT)")
        db.execute("INSERT INTO n VALUES (1), (1)")
    with refimpl.connect(path) as db:
        assert rows(db, "SELECT id, v FROM t ORDER BY id") == [(1, 1), (2, 20)]
        assert rows(db, "SELECT v FROM n") == [(1,), (1,)]
        db.execute("DELETE FROM n WHERE v = 1")
    with refimpl.connect(path) as db:
        assert rows(db, "SELECT count(*) FROM n") == [(0,)]


def test_databases(db):
    assert db.execute("CREATE DATABASE other").message == "database 'other' created"
    other_db = refimpl.Connection(db.instance, "other")
    other_db.execute("CREATE TABLE t (id INT)")
    assert rows(other_db, "SHOW TABLES") == [("t", "table")]
    assert db.execute("ALTER DATABASE other SET WAL_ARCHIVE = '2GB'").message == (
        "database 'other' wal_archive set to '2GB'"
    )
    assert db.instance.database("other").settings["wal_archive"] == 2 * 1024**3
