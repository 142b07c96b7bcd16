"""COPY through the protocol's copy messages with psycopg: FROM STDIN and TO STDOUT in the
simple and the extended protocol, one transaction and one LSN, CopyFail and bad data copying
nothing (with the line and column), inside BEGIN, and the connection going on after each."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import errors as pgerrors
from psycopg import pq

from tests.hypothesis_settings import OVER_FIXTURE

CREATE = "CREATE TABLE t (id INT PRIMARY KEY, name STRING, x DOUBLE, ts TIMESTAMP)"


def lsns(pg, db: str) -> list[int]:
    return [row[0] for row in pg.http.rows("SELECT lsn FROM changes('t') WHERE op = 'upsert'", db)]


def test_copy_in_by_rows_and_out_again(pg, db):
    rows: list[tuple[int, str | None, float | None, datetime | None]] = [
        (n, f"name {n}\twith\\tab", n / 2, datetime(2026, 9, 24, 10, 0, n % 60, tzinfo=UTC))
        for n in range(2500)
    ]
    rows.append((9999, None, None, None))
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        with conn.cursor() as cur:
            with cur.copy("COPY t (id, name, x, ts) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            assert cur.statusmessage == f"COPY {len(rows)}"
            assert cur.rowcount == len(rows)
            # Every row in one transaction: one commit, one LSN.
            assert len(set(lsns(pg, db))) == 1
            with cur.copy("COPY (SELECT id, name, x, ts FROM t ORDER BY id) TO STDOUT") as copy:
                copy.set_types(["int4", "text", "float8", "timestamptz"])
                back = list(copy.rows())
            assert cur.rowcount == len(rows)  # from the tag COPY n
        assert back == rows
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (len(rows),)


def test_copy_csv_text_in_blocks_of_any_size_and_out_as_text(pg, db):
    text = "id,name\n" + "".join(f'{n},"a, ""quoted"" {n}"\n' for n in range(1000))
    data = text.encode()
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        cur = conn.cursor()
        with cur.copy("COPY t (id, name) FROM STDIN WITH (FORMAT csv, HEADER true)") as copy:
            for at in range(0, len(data), 777):  # blocks that cut lines and fields
                copy.write(data[at : at + 777])
        assert cur.rowcount == 1000
        out = b""
        with cur.copy("COPY t (id, name) TO STDOUT WITH (FORMAT csv, HEADER true)") as copy:
            for block in copy:
                out += bytes(block)
        lines = sorted(out.decode().splitlines()[1:], key=lambda line: int(line.split(",")[0]))
        assert out.decode().splitlines()[0] == "id,name"
        assert "\n".join(lines) + "\n" == text.split("\n", 1)[1]


def test_a_copy_fail_or_a_bad_line_copies_nothing_and_the_connection_goes_on(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        cur = conn.cursor()
        with pytest.raises(RuntimeError):  # psycopg sends CopyFail, then raises it again
            with cur.copy("COPY t (id, name) FROM STDIN") as copy:
                copy.write_row((1, "a"))
                raise RuntimeError("the client gives up")
        with pytest.raises(psycopg.DataError, match=r"line 3, column 1 \(id\)"):
            with cur.copy("COPY t (id, name) FROM STDIN") as copy:
                copy.write(b"1\ta\n2\tb\nthree\tc\n" + b"4\td\n" * 10_000)
        with pytest.raises(pgerrors.UndefinedTable):
            with cur.copy("COPY nowhere FROM STDIN") as copy:
                copy.write(b"1\n")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        assert lsns(pg, db) == []
        with cur.copy("COPY t (id) FROM STDIN") as copy:
            copy.write(b"7\n")
        assert conn.execute("SELECT id FROM t").fetchall() == [(7,)]


def test_copy_inside_a_transaction_is_rolled_back_with_it(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        conn.execute("BEGIN")
        cur = conn.cursor()
        with cur.copy("COPY t (id) FROM STDIN") as copy:
            copy.write(b"1\n2\n")
        assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        # A COPY that fails inside BEGIN fails the transaction, as any statement does.
        conn.execute("BEGIN")
        with pytest.raises(psycopg.DataError):
            with cur.copy("COPY t (id) FROM STDIN") as copy:
                copy.write(b"x\n")
        assert conn.info.transaction_status == pq.TransactionStatus.INERROR
        conn.execute("ROLLBACK")


def test_copy_in_the_extended_protocol(pg, db):
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        pgconn = conn.pgconn
        pgconn.send_query_params(b"COPY t (id, name) FROM STDIN", None)
        started = pgconn.get_result()
        assert started.status == pq.ExecStatus.COPY_IN
        assert started.nfields == 2
        assert pgconn.put_copy_data(b"1\tone\n2\ttwo\n") == 1
        assert pgconn.put_copy_end() == 1
        done = pgconn.get_result()
        assert done.status == pq.ExecStatus.COMMAND_OK, done.error_message
        assert done.command_status == b"COPY 2"
        assert pgconn.get_result() is None
        # CopyFail in the extended protocol: an error, then the messages up to Sync skipped.
        pgconn.send_query_params(b"COPY t (id) FROM STDIN", None)
        assert pgconn.get_result().status == pq.ExecStatus.COPY_IN
        pgconn.put_copy_data(b"3\n")
        pgconn.put_copy_end(b"changed my mind")
        failed = pgconn.get_result()
        assert failed.status == pq.ExecStatus.FATAL_ERROR
        assert failed.error_field(pq.DiagnosticField.SQLSTATE) == b"57014"
        assert pgconn.get_result() is None
        pgconn.send_query_params(b"COPY (SELECT id, name FROM t ORDER BY id) TO STDOUT", None)
        assert pgconn.get_result().status == pq.ExecStatus.COPY_OUT
        data = b""
        while (got := pgconn.get_copy_data(0))[0] > 0:
            data += bytes(got[1])
        assert data == b"1\tone\n2\ttwo\n"
        assert pgconn.get_result().command_status == b"COPY 2"
        assert pgconn.get_result() is None
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


@settings(OVER_FIXTURE, max_examples=15)
@given(
    st.lists(
        st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=20),
        min_size=1,
        max_size=20,
    )
)
def test_any_text_goes_in_and_comes_out_the_same(pg, names):
    with pg.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS copied")
        conn.execute("CREATE TABLE copied (id INT PRIMARY KEY, name STRING)")
        cur = conn.cursor()
        with cur.copy("COPY copied FROM STDIN") as copy:
            for n, name in enumerate(names):
                copy.write_row((n, name))
        with cur.copy("COPY (SELECT name FROM copied ORDER BY id) TO STDOUT") as copy:
            back = [row[0] for row in copy.rows()]
        conn.execute("DROP TABLE copied")
    assert back == names
