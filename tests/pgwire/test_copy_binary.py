"""COPY in PostgreSQL's binary format, both ways, through psycopg's binary copy and asyncpg's
`copy_records_to_table` / `copy_from_query`, and over HTTP; data whose framing cannot be read
answers 22P04 with what is wrong, copies nothing, and the connection goes on."""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import errors as pgerrors

from refimpl.engine.storage import values
from tests.hypothesis_settings import OVER_FIXTURE

CREATE = (
    "CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE, name STRING, sym SYMBOL,"
    " ok BOOLEAN, at TIMESTAMP)"
)
PG_TYPES = ["int4", "int8", "float8", "text", "text", "bool", "timestamptz"]
AT = datetime(2026, 9, 24, 10, 0, 0, 250000, UTC)
ROW = (1, 2**40, 1.5, "é'x\t\n", "s", True, AT)
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER = SIGNATURE + b"\0\0\0\0" + b"\0\0\0\0"
TRAILER = b"\xff\xff"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=30)


def tuple_of(*fields: bytes | None) -> bytes:
    """One tuple of binary COPY data."""
    out = struct.pack("!h", len(fields))
    for field in fields:
        out += struct.pack("!i", -1) if field is None else struct.pack("!i", len(field)) + field
    return out


def int4(n: int) -> bytes:
    return struct.pack("!i", n)


def test_psycopg_binary_copy_in_and_out(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        cur = conn.cursor()
        with cur.copy("COPY t FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(PG_TYPES)
            copy.write_row(ROW)
            copy.write_row((2, None, None, None, None, None, None))
        assert cur.statusmessage == "COPY 2"
        with cur.copy("COPY t TO STDOUT (FORMAT binary)") as copy:
            copy.set_types(PG_TYPES)
            rows = sorted(copy.rows())
        assert rows == [ROW, (2, None, None, None, None, None, None)]
        # A query's rows, and no rows at all: the header and trailer alone.
        with cur.copy("COPY (SELECT id, name FROM t WHERE id > 5) TO STDOUT (FORMAT binary)") as c:
            assert b"".join(bytes(block) for block in c) == HEADER + TRAILER
        assert conn.execute("SELECT name FROM t WHERE id = 1").fetchone() == (ROW[3],)


def test_binary_copy_of_some_columns_fills_the_others_with_null(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        cur = conn.cursor()
        with cur.copy("COPY t (name, id) FROM STDIN WITH (FORMAT binary)") as copy:
            copy.write(HEADER + tuple_of(b"seven", int4(7)) + TRAILER)
        assert conn.execute("SELECT id, name, big FROM t").fetchall() == [(7, "seven", None)]


@settings(OVER_FIXTURE, max_examples=25)
@given(
    st.lists(
        st.tuples(
            st.integers(values.BIGINT_MIN, values.BIGINT_MAX) | st.none(),
            st.floats(allow_nan=False, allow_infinity=False) | st.none(),
            TEXT | st.none(),
            st.booleans() | st.none(),
            st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX).map(
                lambda micros: _EPOCH + timedelta(microseconds=micros)
            )
            | st.none(),
        ),
        max_size=30,
    )
)
def test_any_rows_go_in_and_come_out_the_same_in_binary(pg, rows):
    types = ["int4", "int8", "float8", "text", "bool", "timestamptz"]
    with pg.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS copied")
        conn.execute(
            "CREATE TABLE copied (id INT PRIMARY KEY, big BIGINT, x DOUBLE, s STRING,"
            " ok BOOLEAN, at TIMESTAMP)"
        )
        cur = conn.cursor()
        with cur.copy("COPY copied FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(types)
            for n, row in enumerate(rows):
                copy.write_row((n, *row))
        with cur.copy("COPY (SELECT * FROM copied ORDER BY id) TO STDOUT (FORMAT binary)") as c:
            c.set_types(types)
            back = [row[1:] for row in c.rows()]
        conn.execute("DROP TABLE copied")
    assert back == rows


def test_asyncpg_copy_records_to_table_and_copy_from_query(pg, db):
    async def work(conn):
        await conn.execute(CREATE)
        first = await conn.copy_records_to_table("t", records=[ROW, (2, 3, 0.5, "", "", False, AT)])
        some = await conn.copy_records_to_table("t", records=[(3, "three")], columns=["id", "name"])
        out = io.BytesIO()
        # Without arguments: with them asyncpg quotes each by the server's quote_literal(),
        # which this server lacks (spec/pgwire.md, the clients' table).
        copied = await conn.copy_from_query(
            "SELECT id, name FROM t WHERE id > 1 ORDER BY id", output=out, format="csv"
        )
        binary = io.BytesIO()
        await conn.copy_from_table("t", columns=["id"], output=binary, format="binary")
        rows = await conn.fetch("SELECT * FROM t ORDER BY id")
        return first, some, copied, out.getvalue(), binary.getvalue(), [tuple(r) for r in rows]

    first, some, copied, csv_text, binary, rows = pg.run_asyncpg(db, work)
    assert (first, some, copied) == ("COPY 2", "COPY 1", "COPY 2")
    assert csv_text == b'2,""\n3,three\n'
    assert binary.startswith(HEADER) and binary.endswith(TRAILER)
    assert sorted(binary[len(HEADER) : -2].split(b"\x00\x01\x00\x00\x00\x04")[1:]) == [
        int4(1), int4(2), int4(3)
    ]  # fmt: skip
    assert rows[0] == ROW and rows[2] == (3, None, None, "three", None, None, None)


BAD_DATA = [
    (b"PGCOPY\n\xff\r\n\x01" + b"\0" * 8 + TRAILER, "does not start with the signature"),
    (SIGNATURE + b"\x00\x01\x00\x00" + b"\0\0\0\0" + TRAILER, "the flags ask for OIDs"),
    (SIGNATURE + b"\x00\x00\x00\x01" + b"\0\0\0\0" + TRAILER, "set a critical bit"),
    (HEADER + b"\x00", "the data ends inside a tuple's field count"),
    (HEADER + tuple_of(int4(1)) + TRAILER, "tuple 1: 1 field\\(s\\) where 2"),
    (HEADER + tuple_of(int4(1), b"a", b"extra") + TRAILER, "tuple 1: 3 field\\(s\\) where 2"),
    (HEADER + tuple_of(int4(1), b"a")[:-1], "the data ends inside column 2 \\(name\\)"),
    (HEADER + tuple_of(b"\0\0\0\0\0\0\0\1", b"a") + TRAILER, "8 bytes where int4 takes 4"),
    (HEADER + tuple_of(int4(1), b"a") + TRAILER + b"more", "data follows the trailer"),
    (HEADER[:6], "the data ends inside the signature"),
]


@pytest.mark.parametrize(("data", "problem"), BAD_DATA)
def test_binary_data_that_cannot_be_read_copies_nothing(pg, db, data, problem):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        cur = conn.cursor()
        with pytest.raises(pgerrors.BadCopyFileFormat, match=problem) as caught:
            with cur.copy("COPY t FROM STDIN (FORMAT binary)") as copy:
                copy.write(HEADER + tuple_of(int4(100), b"before") if b"ends" in data else b"")
                copy.write(data)
        assert "COPY t (FORMAT binary)" in str(caught.value)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        with cur.copy("COPY t FROM STDIN (FORMAT binary)") as copy:
            copy.write(HEADER + tuple_of(int4(1), b"after") + TRAILER)
        assert conn.execute("SELECT id, name FROM t").fetchall() == [(1, "after")]


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        (b"\xff\xfe", "tuple 1, column 2 \\(name\\): not valid UTF-8"),
        (struct.pack("!q", 2**62), "tuple 1, column 2 \\(name\\)"),
    ],
)
def test_a_value_its_type_cannot_hold_is_a_data_error(pg, db, field, problem):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING, at TIMESTAMP)")
        cur = conn.cursor()
        columns = "(id, name)" if b"\xff" in field else "(id, at, name)"
        fields = (int4(1), field) if b"\xff" in field else (int4(1), field, b"x")
        if columns == "(id, at, name)":
            problem = "tuple 1, column 2 \\(at\\): the timestamp is outside years 1 to 9999"
        with pytest.raises(pgerrors.DataException, match=problem):
            with cur.copy(f"COPY t {columns} FROM STDIN (FORMAT binary)") as copy:
                copy.write(HEADER + tuple_of(*fields) + TRAILER)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_binary_takes_no_text_option(pg, db):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        for option in ("DELIMITER ','", "HEADER", "NULL ''"):
            with pytest.raises(
                psycopg.DataError, match=f"COPY {option.split()[0]} is not an option of FORMAT"
            ):
                with conn.cursor().copy(f"COPY t FROM STDIN (FORMAT binary, {option})"):
                    pass


def test_binary_copy_over_http(pg, db):
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db=db)
    binary = {"Content-Type": "application/octet-stream"}

    def copy(sql: str, body: bytes):
        return pg.http.post("/exec", params={"db": db, "query": sql}, data=body, headers=binary)

    data = HEADER + tuple_of(int4(5), b"five") + TRAILER
    assert copy("COPY t FROM STDIN (FORMAT binary)", data).status_code == 200
    out = pg.http.get("/exec", params={"db": db, "query": "COPY t TO STDOUT (FORMAT binary)"})
    assert out.status_code == 200
    assert out.headers["Content-Type"] == "application/octet-stream"
    assert out.content == data
    bad = copy("COPY t FROM STDIN (FORMAT binary)", b"PGCOPY\n")
    assert bad.status_code == 400
    assert "the data ends inside the signature" in bad.json()["error"]
    assert pg.http.rows("SELECT count(*) FROM t", db=db) == [[1]]


def test_a_double_no_column_holds_is_refused_with_its_tuple(pg, db):
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, x DOUBLE)")
        for bad in (float("inf"), float("nan")):
            fields = (int4(1), struct.pack("!d", 1.0)), (int4(2), struct.pack("!d", bad))
            with pytest.raises(
                pgerrors.DataException, match="tuple 2, column 2 \\(x\\): .* DOUBLE"
            ):
                with conn.cursor().copy("COPY t FROM STDIN (FORMAT binary)") as copy:
                    copy.write(HEADER + tuple_of(*fields[0]) + tuple_of(*fields[1]) + TRAILER)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
