"""The rules taken from SQLite for its corpus, checked against the standard library's sqlite3:
the bit operators on 64 bits, BLOB literals, and text constants next to numbers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.errors import SqlError, SqlSyntaxError, TypeMismatch

BIGINTS = st.integers(-(2**63), 2**63 - 1)
COUNTS = st.integers(-70, 70)
# Text that is no number's text (SQLite's affinity leaves it text, never equal to a number).
WORDS = st.text(alphabet="abcxyz _", min_size=1, max_size=6)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path_factory.mktemp("rules") / "data")
    connection.execute("CREATE TABLE n (x INTEGER, d REAL)")
    connection.execute("INSERT INTO n VALUES (1, 1.5), (2, NULL), (NULL, 2.5)")
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def lite() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE n (x INTEGER, d REAL)")
    connection.execute("INSERT INTO n VALUES (1, 1.5), (2, NULL), (NULL, 2.5)")
    yield connection
    connection.close()


def _both(db: refimpl.Connection, lite: sqlite3.Connection, sql: str) -> tuple[list, list]:
    ours = [tuple(row) for row in db.execute(sql).rows]
    theirs = [tuple(None if v is None else v for v in row) for row in lite.execute(sql)]
    return ours, theirs


def _literal(value: int) -> str:
    # -2**63 has no literal of its own (its positive half is past the range): written so.
    return "(-9223372036854775807 - 1)" if value == -(2**63) else f"({value})"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(a=BIGINTS, b=BIGINTS, count=COUNTS)
def test_bit_operators_answer_as_sqlite(db, lite, a: int, b: int, count: int) -> None:
    x, y = _literal(a), _literal(b)
    sql = f"SELECT {x} << {count}, {x} >> {count}, {x} & {y}, {x} | {y}, 1 + {count} << 2"
    ours, theirs = _both(db, lite, sql)
    assert ours == theirs, sql


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(word=WORDS, number=st.integers(-3, 3))
def test_text_that_is_no_number_equals_no_number(db, lite, word: str, number: int) -> None:
    text = "'" + word + "'"
    sql = (
        f"SELECT {text} IN (SELECT x FROM n), {text} NOT IN (SELECT x FROM n),"
        f" {text} IN (1, {number}), {text} NOT IN (SELECT d FROM n WHERE d > 2),"
        f" x = {text}, x <> {text}, d IN ({text}, 1.5) FROM n"
    )
    ours, theirs = _both(db, lite, sql)
    assert [tuple(None if v is None else bool(v) for v in row) for row in ours] == [
        tuple(None if v is None else bool(v) for v in row) for row in theirs
    ], sql


def test_text_of_a_number_next_to_a_column_is_that_number(db, lite) -> None:
    sql = "SELECT x, d FROM n WHERE x = '2' OR d = '2.5' OR x IN ('1')"
    ours, theirs = _both(db, lite, sql)
    assert set(ours) == set(theirs) == {(None, 2.5), (1, 1.5), (2, None)}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(a=st.binary(max_size=4), b=st.binary(max_size=4))
def test_blob_literals_compare_as_sqlite(db, lite, a: bytes, b: bytes) -> None:
    x, y = f"X'{a.hex()}'", f"X'{b.hex()}'"
    sql = (
        f"SELECT {x} = {y}, {x} < {y}, {x} >= {y}, {x} IN ({y}, 1, 'a'),"
        f" {x} NOT IN (SELECT x FROM n WHERE x IS NOT NULL), {x} = '{a.decode('latin-1')}'"
    )
    if "'" in a.decode("latin-1") or "\x00" in a.decode("latin-1"):
        sql = sql.rsplit(",", 1)[0]
    ours, theirs = _both(db, lite, sql)
    assert [tuple(bool(v) for v in row) for row in ours] == [
        tuple(bool(v) for v in row) for row in theirs
    ], sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT X'41'",
        "SELECT X'41' || 'a'",
        "SELECT length(X'41')",
        "SELECT CAST(X'41' AS STRING)",
        "SELECT group_concat(X'41')",
        "SELECT max(X'41')",
        "VALUES (X'41')",
        "SELECT X'41' + 1",
        "SELECT X'41' < 1",
        "SELECT 1.5 << 1",
        "SELECT 'a' < 1",
        "SELECT x FROM n WHERE CAST(x AS STRING) = 1",
    ],
)
def test_what_sqlite_answers_and_this_declines_is_a_clear_error(db, sql: str) -> None:
    with pytest.raises(TypeMismatch):
        db.execute(sql)


def test_a_blob_literal_needs_pairs_of_hex_digits(db) -> None:
    with pytest.raises(SqlSyntaxError, match="pairs of hexadecimal digits"):
        db.execute("SELECT X'4' = X'41'")
    with pytest.raises(SqlError):
        db.execute("SELECT X'zz' = X'41'")


def test_integer_columns_hold_64_bits_and_sum_past_them_fails(db) -> None:
    db.execute("CREATE TABLE big (x INTEGER)")
    db.execute("INSERT INTO big VALUES (1 << 63), (1 << 63), (1)")
    assert db.execute("SELECT total(x), sum(DISTINCT x) FROM big").rows == [
        (float(-(2**64) + 1), -(2**63) + 1)
    ]
    with pytest.raises(SqlError, match="out of range for BIGINT"):
        db.execute("SELECT sum(x) FROM big")
